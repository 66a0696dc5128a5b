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

// FromConfig builds the summarizer c asks for: model "" or "extractive" gives Extractive,
// "default" SessionModel, any other id a Fallback over an LLM on the configured provider, with
// the summarizer block's thinking budget and timeouts.
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

// SessionModel summarizes each request with its session's own model (Request.Session) with
// Template's settings, using the configured key when the session has none; requests without a
// session endpoint or any credentials go to Extractive.
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
