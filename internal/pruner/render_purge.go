package pruner

// purgeErrors is phase 2: it replaces the arguments of every errored call listed in State.Purged
// (by occurrence key, so each error pairs with its own call).
func (r *renderer) purgeErrors(inRange []bool) {
	if !r.pol.PurgeErrors.Enabled || len(r.st.Purged) == 0 {
		return
	}
	for _, c := range r.v.calls {
		if c.res == nil || c.res.obs != nil || !c.res.b.IsError || inRange[c.msg] || !r.st.Purged[c.res.occKey()] {
			continue
		}
		size := utf16Len(compactJSON(c.b.Input))
		nb := c.b.WithInput(PurgedArgs(size))
		if nb == c.b {
			continue // a call whose input cannot be rewritten (a Responses local_shell_call)
		}
		r.blk(c.msg)[c.blk] = nb
		r.res.Stats.Purged++
	}
}
