package cost

// Cost returns the USD cost of the bill (input and output).
func (b Bill) Cost() float64 { return b.Usage.Cost(b.Price) }
