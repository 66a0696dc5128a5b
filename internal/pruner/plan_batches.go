package pruner

import "strconv"

// observes reports whether the batch holds a text observation: its summary then tells how to
// ask for the originals in text.
func (it *planItem) observes() bool {
	for _, pc := range it.calls {
		if pc.c.res.obs != nil {
			return true
		}
	}
	return false
}

// finishItem applies dedup and the trivial check and builds the summarizer batch.
func (p *Plan) finishItem(v *analysis, it *planItem) {
	st, pol := p.st, &p.pol
	var kept []pendingCall
	for _, pc := range it.calls {
		it.allCalls++
		it.allChars += pc.rec.Chars
		it.lastKey, it.lastTool = pc.rec.Key, pc.rec.Tool
		if orig, ok := st.Hashes[pc.rec.Hash]; pol.Dedup && ok && orig != pc.rec.Key {
			it.aliases = append(it.aliases, [2]string{pc.rec.Key, orig})
			continue
		}
		kept = append(kept, pc)
		it.rawChars += pc.rec.Chars
	}
	it.calls = kept
	switch {
	case len(kept) == 0:
		it.kind = itemDeduped
		return
	case it.rawChars < pol.MinBatchChars:
		it.kind = itemTrivial
		return
	}
	it.kind = itemSummarize
	// Frontier of a summarized batch is its last kept call.
	it.lastKey, it.lastTool = kept[len(kept)-1].rec.Key, kept[len(kept)-1].rec.Tool
	b := &Batch{ID: "batch-" + strconv.Itoa(len(p.Batches)+1), Kind: KindBatch, System: SummarizerSystemPrompt, RawChars: it.rawChars}
	var texts []string
	lastMsg := -1
	for i, pc := range kept {
		if pc.c.msg != lastMsg {
			lastMsg = pc.c.msg
			if t := assistantText(v.msgs[pc.c.msg]); t != "" {
				texts = append(texts, t)
			}
		}
		text := pc.c.res.b.ResultText()
		b.Keys = append(b.Keys, pc.rec.Key)
		b.Calls = append(b.Calls, BatchCall{Label: i + 1, Key: pc.rec.Key, Tool: pc.rec.Tool, Args: pc.c.b.Input, Result: text, IsError: pc.rec.IsError})
		p.addBlobs(pc.rec, pc.c.b.Input, text)
	}
	at := ""
	for i, t := range texts {
		if i > 0 {
			at += "\n\n"
		}
		at += t
	}
	b.Prompt = BatchPrompt(at, b.Calls)
	p.Batches = append(p.Batches, *b)
	it.batch = &p.Batches[len(p.Batches)-1]
}
