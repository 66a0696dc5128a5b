package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/condense-dev/condense/internal/buildinfo"
	"github.com/condense-dev/condense/internal/config"
	"github.com/condense-dev/condense/internal/pruner"
	"github.com/condense-dev/condense/internal/store"
)

// authorized reports whether a request may read session sid: always when session auth is
// off, otherwise only with that session's own token (so no session reads another's records).
func (s *Server) authorized(r *http.Request, sid string) bool {
	if len(s.opt.SessionSecret) == 0 {
		return true
	}
	return config.VerifySessionToken(s.opt.SessionSecret, sid, r.Header.Get(HeaderToken))
}

func writeJSONBody(w http.ResponseWriter, status int, v any) {
	b, _ := json.MarshalIndent(v, "", "  ")
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

func adminError(w http.ResponseWriter, status int, msg string) {
	writeJSONBody(w, status, map[string]any{"error": map[string]string{"message": msg}})
}

// SessionView is the JSON document GET /admin/sessions/{id} returns.
type SessionView struct {
	Session          string             `json:"session"`
	Version          uint64             `json:"version"`
	LastSeen         time.Time          `json:"lastSeen,omitzero"`
	Stats            map[string]int64   `json:"stats"`
	DiagnosticCounts map[string]int64   `json:"diagnosticCounts"`
	Diagnostics      []store.Diagnostic `json:"diagnostics"`
	Records          int                `json:"records"`
	Refs             []string           `json:"refs"`
	Summaries        int                `json:"summaries"`
	Chains           int                `json:"chains"`
	FlushLease       *store.Lease       `json:"flushLease,omitempty"`
}

func (s *Server) adminSnapshot(w http.ResponseWriter, r *http.Request) (string, *store.Snapshot, *pruner.State, bool) {
	sid := r.PathValue("id")
	if !s.authorized(r, sid) {
		adminError(w, http.StatusUnauthorized, "missing or invalid "+HeaderToken+" for this session")
		return "", nil, nil, false
	}
	if s.opt.Store == nil {
		adminError(w, http.StatusServiceUnavailable, "no session store configured")
		return "", nil, nil, false
	}
	if err := store.ValidateSessionID(sid); err != nil {
		adminError(w, http.StatusBadRequest, err.Error())
		return "", nil, nil, false
	}
	snap, err := s.load(r.Context(), sid)
	if err != nil {
		adminError(w, http.StatusServiceUnavailable, "store: "+err.Error())
		return "", nil, nil, false
	}
	st := pruner.NewState()
	if err := st.UnmarshalBinary(snap.State); err != nil {
		adminError(w, http.StatusInternalServerError, err.Error())
		return "", nil, nil, false
	}
	return sid, snap, st, true
}

func (s *Server) handleAdminSession(w http.ResponseWriter, r *http.Request) {
	sid, snap, st, ok := s.adminSnapshot(w, r)
	if !ok {
		return
	}
	if snap.Version == 0 && len(snap.Stats) == 0 {
		adminError(w, http.StatusNotFound, "unknown session "+sid)
		return
	}
	v := SessionView{Session: sid, Version: snap.Version, LastSeen: snap.LastSeen, Stats: snap.Stats,
		DiagnosticCounts: snap.DiagnosticCounts, Diagnostics: snap.Diagnostics, Records: len(st.Records),
		Summaries: len(st.Summaries), Chains: len(st.Chains), FlushLease: snap.Lease, Refs: []string{}}
	for _, rec := range st.Records {
		v.Refs = append(v.Refs, fmt.Sprint(recordRef(rec)))
	}
	sortRefs(v.Refs)
	writeJSONBody(w, http.StatusOK, v)
}

func (s *Server) handleAdminRecord(w http.ResponseWriter, r *http.Request) {
	sid, _, st, ok := s.adminSnapshot(w, r)
	if !ok {
		return
	}
	ref := r.PathValue("ref")
	text := pruner.Query(st, ref, func(key string) ([]byte, bool) {
		b, err := s.opt.Store.GetBlob(r.Context(), sid, key)
		return b, err == nil
	})
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = io.WriteString(w, text)
}

// handleAdminFlush asks for a flush of the session: the next request of the session (on any
// replica) starts it.
func (s *Server) handleAdminFlush(w http.ResponseWriter, r *http.Request) {
	sid := r.PathValue("id")
	if !s.authorized(r, sid) {
		adminError(w, http.StatusUnauthorized, "missing or invalid "+HeaderToken+" for this session")
		return
	}
	if s.opt.Store == nil {
		adminError(w, http.StatusServiceUnavailable, "no session store configured")
		return
	}
	if err := s.opt.Store.IncrStats(r.Context(), sid, map[string]int64{statFlushRequested: 1}); err != nil {
		status := http.StatusServiceUnavailable
		if errors.Is(err, store.ErrInvalidSession) {
			status = http.StatusBadRequest
		}
		adminError(w, status, err.Error())
		return
	}
	writeJSONBody(w, http.StatusAccepted, map[string]string{"session": sid, "status": "flush requested; it starts with the session's next request"})
}

// QueryInput is the input of the MCP context_tree_query tool.
type QueryInput struct {
	// ToolCallIds are short refs (t12), occurrence keys or raw tool-call ids.
	ToolCallIds []string `json:"toolCallIds" jsonschema:"short refs (t12), occurrence keys or raw tool-call ids to retrieve"`
	// Session names the session; the X-Condense-Session header of the MCP connection wins.
	Session string `json:"session,omitempty" jsonschema:"the condense session id (optional when the X-Condense-Session header is set)"`
}

// newMCPHandler serves context_tree_query over MCP (streamable HTTP, stateless). The session
// comes from the X-Condense-Session header (or the session argument); with session auth on,
// the X-Condense-Token header must be that session's token.
func (s *Server) newMCPHandler() http.Handler {
	srv := mcp.NewServer(&mcp.Implementation{Name: "condense", Version: buildinfo.String()}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: pruner.QueryToolName,
		Description: "Retrieve original tool outputs that condense pruned from the context, by the short refs (t1, t2, ...) listed in a summary, occurrence keys or raw tool-call ids."},
		func(ctx context.Context, req *mcp.CallToolRequest, in QueryInput) (*mcp.CallToolResult, any, error) {
			var h http.Header
			if req.Extra != nil {
				h = req.Extra.Header
			}
			sid := strings.TrimSpace(h.Get(HeaderSession))
			if sid == "" {
				sid = in.Session
			}
			if sid == "" {
				return nil, nil, errors.New("no session: set the X-Condense-Session header or the session argument")
			}
			if len(s.opt.SessionSecret) > 0 && !config.VerifySessionToken(s.opt.SessionSecret, sid, h.Get(HeaderToken)) {
				return nil, nil, errors.New("missing or invalid " + HeaderToken + " for this session")
			}
			if s.opt.Store == nil {
				return nil, nil, errors.New("no session store configured")
			}
			snap, err := s.load(ctx, sid)
			if err != nil {
				return nil, nil, fmt.Errorf("store: %w", err)
			}
			t := &turn{sid: sid, log: s.log.With("session", sid)}
			if err := s.useSnapshot(t, snap); err != nil {
				return nil, nil, err
			}
			input, _ := json.Marshal(map[string][]string{"toolCallIds": in.ToolCallIds})
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s.queryText(ctx, t, input)}}}, nil, nil
		})
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
}

// recordRef is the ref a record is queried by: its tN, or its occurrence key when spilled.
func recordRef(r *pruner.Record) string {
	if r.Ref != "" {
		return r.Ref
	}
	return r.Key
}

// sortRefs orders tN refs numerically, then other keys lexically.
func sortRefs(refs []string) {
	num := func(s string) (int, bool) {
		if len(s) < 2 || s[0] != 't' {
			return 0, false
		}
		n := 0
		for _, c := range s[1:] {
			if c < '0' || c > '9' {
				return 0, false
			}
			n = n*10 + int(c-'0')
		}
		return n, true
	}
	less := func(a, b string) bool {
		na, oka := num(a)
		nb, okb := num(b)
		switch {
		case oka && okb:
			return na < nb
		case oka != okb:
			return oka
		}
		return a < b
	}
	for i := 1; i < len(refs); i++ {
		for j := i; j > 0 && less(refs[j], refs[j-1]); j-- {
			refs[j], refs[j-1] = refs[j-1], refs[j]
		}
	}
}
