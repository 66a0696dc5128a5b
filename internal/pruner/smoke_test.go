package pruner

import (
	"strings"
	"testing"

	"github.com/condense-dev/condense/internal/wire"
)

func TestSmokeFlushAndRender(t *testing.T) {
	for _, f := range []wire.Format{wire.Anthropic, wire.OpenAI} {
		t.Run(f.String(), func(t *testing.T) {
			x := newTx(f).user("task one")
			x.turn("c1", "read", `{"path":"a.go"}`, big("A", 3000))
			x.turn("c2", "bash", `{"cmd":"ls"}`, big("B", 3000))
			x.asst("", "done one")
			x.user("task two")
			req := x.req(t)
			pol := DefaultPolicy()
			pol.Chain.RollingWindow = 0
			st := flush(t, req, NewState(), pol)
			if len(st.Records) != 2 || len(st.Chains) != 1 {
				t.Fatalf("records=%d chains=%d", len(st.Records), len(st.Chains))
			}
			res := Render(req, st, pol)
			if res.Unchanged {
				t.Fatal("unchanged")
			}
			mustValid(t, req, res)
			got := strings.Join(texts(res.Request), "\n")
			if !strings.Contains(got, `<compressed-chain id="b1" tools="t1,t2">`) {
				t.Fatalf("no synthetic:\n%s", got)
			}
			if res.BytesAfter >= res.BytesBefore {
				t.Fatalf("bytes %d -> %d", res.BytesBefore, res.BytesAfter)
			}
			t.Log(got)
		})
	}
}
