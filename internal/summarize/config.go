package summarize

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/condense-dev/condense/internal/config"
	"github.com/condense-dev/condense/internal/cost"
	"github.com/condense-dev/condense/internal/wire"
)

// Options carries what FromConfig needs besides the configuration document.
type Options struct {
	// Client is the HTTP client for provider calls (nil: a plain client).
	Client *http.Client
	// Prices is the price table for cost accounting (nil: cost.DefaultPrices()).
	Prices *cost.Prices
	// MaxOutputTokens caps summary text (0: 4096).
	MaxOutputTokens int64
	// ProbeCooldown is the fallback probe interval (0: DefaultProbeCooldown).
	ProbeCooldown time.Duration
	// OnEvent receives fallback transitions (may be nil).
	OnEvent func(Event)
}

// FromConfig builds the summarizer a configuration asks for:
//
//   - model "" or "extractive": Extractive;
//   - model "default": SessionModel — each request is summarized by the session's own model
//     (Request.Session); a request without one, or without credentials for it, falls back
//     to Extractive;
//   - any other model id: a Fallback over an LLM calling that model on the configured
//     provider (summarizer.baseURL, else the provider's upstream) with the configured key.
//
// The thinking budget, idle and total timeouts come from the summarizer block.
func FromConfig(c *config.Config, opt Options) (Summarizer, error) {
	sc := c.Summarizer
	model := strings.TrimSpace(sc.Model)
	if model == "" || model == ExtractiveModel {
		return Extractive{}, nil
	}
	th, err := ParseThinking(string(sc.ThinkingBudget))
	if err != nil {
		return nil, err
	}
	key, err := sc.APIKey()
	if err != nil {
		return nil, &Error{Kind: KindAuth, Msg: "summarizer API key", Err: err}
	}
	format := wire.Anthropic
	base := c.Upstreams.Anthropic
	if sc.Provider == wire.OpenAI {
		format, base = wire.OpenAI, c.Upstreams.OpenAI
	}
	if sc.BaseURL != "" {
		base = sc.BaseURL
	}
	lo := LLMOptions{
		Endpoint:        Endpoint{Format: format, BaseURL: base, Model: model, APIKey: key},
		Thinking:        th,
		MaxOutputTokens: opt.MaxOutputTokens,
		IdleTimeout:     sc.IdleTimeout.D(),
		TotalTimeout:    sc.TotalTimeout.D(),
		Prices:          opt.Prices,
		Client:          opt.Client,
	}
	if model == SessionModelName {
		lo.Endpoint.Model = "session-model" // placeholder endpoint, replaced per request
		l, err := NewLLM(lo)
		if err != nil {
			return nil, err
		}
		return &SessionModel{Template: l}, nil
	}
	l, err := NewLLM(lo)
	if err != nil {
		return nil, err
	}
	fb := NewFallback(l)
	fb.Control.Cooldown = opt.ProbeCooldown
	fb.OnEvent = opt.OnEvent
	return fb, nil
}

// SessionModel summarizes each request with the session's own model (Request.Session),
// using Template's thinking budget, timeouts and price table; the configured API key is used
// when the session endpoint carries no credentials of its own. Requests without a session
// endpoint, or with no credentials at all, are summarized by Extractive.
type SessionModel struct {
	// Template supplies thinking, timeouts, prices and the configured key.
	Template *LLM
	// Extract summarizes requests that cannot go to a session model.
	Extract Extractive
}

// Summarize implements Summarizer.
func (s *SessionModel) Summarize(ctx context.Context, req *Request) (*Result, error) {
	if req == nil || req.Session == nil || req.Session.Model == "" || req.Session.BaseURL == "" {
		return s.Extract.Summarize(ctx, req)
	}
	l := s.Template.WithEndpoint(*req.Session)
	ep := l.Endpoint()
	if ep.APIKey == "" && ep.Header.Get("Authorization") == "" && ep.Header.Get("x-api-key") == "" {
		return s.Extract.Summarize(ctx, req)
	}
	return l.Summarize(ctx, req)
}
