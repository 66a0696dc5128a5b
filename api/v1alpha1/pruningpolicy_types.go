package v1alpha1

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Condition types used in PruningPolicy and AgentSession status.
const (
	// ConditionReady is True when the object is fully working.
	ConditionReady = "Ready"
	// ConditionProxyAvailable is True when the proxy Deployment has at least its minimum
	// available replicas.
	ConditionProxyAvailable = "ProxyAvailable"
	// ConditionStoreReachable is True when the operator could reach the session store.
	ConditionStoreReachable = "StoreReachable"
	// ConditionDegraded is True on an AgentSession whose session recorded diagnostics.
	ConditionDegraded = "Degraded"
)

// BatchingMode selects how captured tool results are grouped into summaries.
// +kubebuilder:validation:Enum=turn;agent-message
type BatchingMode string

// TriggerMode selects what flushes pending batches.
// +kubebuilder:validation:Enum=agent-message;on-demand
type TriggerMode string

// ThinkingBudget is the reasoning effort requested from the summarizer model.
// +kubebuilder:validation:Enum=off;minimal;low;medium;high;xhigh
type ThinkingBudget string

// ProviderFormat is a provider wire format.
// +kubebuilder:validation:Enum=anthropic;openai
type ProviderFormat string

// RedisMode is the topology of an external Redis.
// +kubebuilder:validation:Enum=standalone;sentinel;cluster
type RedisMode string

// PruningPolicySpec is the desired pruning proxy deployment and the pruning policy it enforces.
type PruningPolicySpec struct {
	// BatchingMode groups captured tool results into summaries: "turn" makes one summary per
	// tool-using assistant turn, "agent-message" one summary per agent reply.
	// +kubebuilder:default=turn
	// +optional
	BatchingMode BatchingMode `json:"batchingMode,omitempty"`

	// Trigger says when pending batches are summarized.
	// +kubebuilder:default={}
	// +optional
	Trigger TriggerSpec `json:"trigger,omitempty"`

	// MinBatchChars skips summarizing a batch whose tool results total fewer characters
	// (UTF-16 code units); the results stay verbatim. 0 disables the check.
	// +kubebuilder:default=1000
	// +kubebuilder:validation:Minimum=0
	// +optional
	MinBatchChars *int32 `json:"minBatchChars,omitempty"`

	// Dedup reuses an earlier summary for a tool result whose content is byte-identical
	// to one already summarized, without calling the summarizer.
	// +kubebuilder:default=true
	// +optional
	Dedup *bool `json:"dedup,omitempty"`

	// Spill moves a single oversized tool result out of the context into the store, leaving a
	// head preview and a recovery reference.
	// +kubebuilder:default={}
	// +optional
	Spill SpillSpec `json:"spill,omitempty"`

	// ProtectedTools lists tool names whose results are never pruned.
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MinLength=1
	// +listType=set
	// +optional
	ProtectedTools []string `json:"protectedTools,omitempty"`

	// ProtectedPaths lists globs matched against a tool call's "path" argument; results of
	// matching calls are never pruned. "**/" matches zero or more directories, "*" and "?" match
	// within one path segment. An empty list disables path protection.
	// +kubebuilder:default={"**/skills/**/*.md"}
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MinLength=1
	// +listType=set
	// +optional
	ProtectedPaths []string `json:"protectedPaths"`

	// RecoveryGraceTurns keeps the output of a recovery query verbatim for this many user turns
	// before it may be summarized again. 0 disables the grace period.
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=0
	// +optional
	RecoveryGraceTurns *int32 `json:"recoveryGraceTurns,omitempty"`

	// ChainCompression collapses whole closed tool chains (a user message, the agent's tool
	// calls, its final reply) into one summary.
	// +kubebuilder:default={}
	// +optional
	ChainCompression ChainCompressionSpec `json:"chainCompression,omitempty"`

	// PurgeErrors replaces the arguments of failed tool calls with a size marker after a
	// cooldown.
	// +kubebuilder:default={}
	// +optional
	PurgeErrors PurgeErrorsSpec `json:"purgeErrors,omitempty"`

	// Observations prunes the text observations of text-protocol agents (mini-swe-agent 1.x,
	// SWE-agent without function calling), which answer an action in a user message, like
	// tool results. Off by default: turn it on for policies that serve such agents.
	// +kubebuilder:default={}
	// +optional
	Observations ObservationsSpec `json:"observations,omitempty"`

	// Summarizer configures the model that writes summaries.
	// +kubebuilder:default={}
	// +optional
	Summarizer SummarizerSpec `json:"summarizer,omitempty"`

	// Upstreams holds the provider base URLs requests are forwarded to.
	// +kubebuilder:default={}
	// +optional
	Upstreams UpstreamsSpec `json:"upstreams,omitempty"`

	// SessionAuth, when set, makes the proxy require a per-session token (an HMAC of the
	// session id under the referenced secret). The operator writes each AgentSession's token
	// into a Secret named in its status.
	// +optional
	SessionAuth *SessionAuthSpec `json:"sessionAuth,omitempty"`

	// Proxy configures the proxy Deployment.
	// +kubebuilder:default={}
	// +optional
	Proxy ProxySpec `json:"proxy,omitempty"`

	// Pruner configures the `condense pruner` worker Deployment. With replicas > 0 the proxy
	// hands summarization to the workers through the store instead of running it in-process.
	// +kubebuilder:default={}
	// +optional
	Pruner PrunerSpec `json:"pruner,omitempty"`

	// Redis says where session state lives: a Redis the operator runs (managed, the default) or
	// one you run (external), at most one of the two. It defaults to {}, so adding
	// redis.external to a policy that never set redis.managed switches it to the external one.
	// +kubebuilder:default={}
	// +optional
	Redis RedisSpec `json:"redis,omitempty"`
}

// TriggerSpec says when pending batches are summarized.
// +kubebuilder:validation:XValidation:rule="!has(self.horizon) || !has(self.maxHorizon) || self.maxHorizon >= self.horizon",message="trigger.maxHorizon must be >= trigger.horizon"
type TriggerSpec struct {
	// Mode is "agent-message" (summarize when the agent sends a final reply without tool calls)
	// or "on-demand" (only the budget triggers below, or an explicit request).
	// +kubebuilder:default=agent-message
	// +optional
	Mode TriggerMode `json:"mode,omitempty"`

	// AutoBudgetThreshold summarizes at the end of a turn once the context uses at least this
	// fraction of the model's context window. A fraction in (0, 1], not a percentage; unset
	// disables it.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:ExclusiveMinimum=true
	// +kubebuilder:validation:Maximum=1
	// +optional
	AutoBudgetThreshold *float64 `json:"autoBudgetThreshold,omitempty"`

	// BudgetTurnDelta summarizes when a single turn grows context usage by at least this
	// fraction of the window, in (0, 1]; unset disables it.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:ExclusiveMinimum=true
	// +kubebuilder:validation:Maximum=1
	// +optional
	BudgetTurnDelta *float64 `json:"budgetTurnDelta,omitempty"`

	// CacheAware defers agent-message, delta and mid-run flushes until the prompt cache has
	// expired or the tokens a flush removes over the expected remaining requests outweigh
	// re-writing the cached prefix. Manual and budget flushes always run.
	// +kubebuilder:default=true
	// +optional
	CacheAware *bool `json:"cacheAware,omitempty"`

	// MidRun (with cacheAware) also flushes inside long agent runs that produce no final reply,
	// over the transcript before the latest midRunGraceTurns tool-using turns.
	// +kubebuilder:default=true
	// +optional
	MidRun *bool `json:"midRun,omitempty"`

	// MidRunGraceTurns is how many of the latest tool-using turns a mid-run flush never touches.
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=1
	// +optional
	MidRunGraceTurns *int32 `json:"midRunGraceTurns,omitempty"`

	// Horizon is the fewest further requests the cache-aware decision expects a context to
	// have; it expects as many more as the context has already seen, up to maxHorizon.
	// +kubebuilder:default=8
	// +kubebuilder:validation:Minimum=1
	// +optional
	Horizon *int32 `json:"horizon,omitempty"`

	// MaxHorizon caps the expected further requests: a flush must pay for its cache rewrite
	// within this many requests. Must be >= horizon.
	// +kubebuilder:default=32
	// +kubebuilder:validation:Minimum=1
	// +optional
	MaxHorizon *int32 `json:"maxHorizon,omitempty"`
}

// SpillSpec configures the eager spill of a single oversized tool result.
type SpillSpec struct {
	// Threshold is the tool-result size (UTF-16 code units) at which it is spilled.
	// +kubebuilder:default=65536
	// +kubebuilder:validation:Minimum=1
	// +optional
	Threshold *int32 `json:"threshold,omitempty"`

	// PreviewBytes is the size (UTF-8 bytes) of the head preview that stays in the context,
	// cut back to the last full line.
	// +kubebuilder:default=2048
	// +kubebuilder:validation:Minimum=0
	// +optional
	PreviewBytes *int32 `json:"previewBytes,omitempty"`
}

// ChainCompressionSpec configures the collapse of closed tool chains.
type ChainCompressionSpec struct {
	// Enabled turns chain compression on.
	// +kubebuilder:default=true
	// +optional
	Enabled *bool `json:"enabled,omitempty"`

	// RollingWindow is how many of the newest closed chains stay uncompressed.
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=0
	// +optional
	RollingWindow *int32 `json:"rollingWindow,omitempty"`

	// StripFinalAssistantThinking removes thinking blocks from the final assistant message a
	// compressed chain keeps.
	// +kubebuilder:default=true
	// +optional
	StripFinalAssistantThinking *bool `json:"stripFinalAssistantThinking,omitempty"`

	// FuseRangeSummary makes one extra summarizer call per compressed chain that fuses its
	// per-turn summaries into one.
	// +kubebuilder:default=true
	// +optional
	FuseRangeSummary *bool `json:"fuseRangeSummary,omitempty"`
}

// PurgeErrorsSpec configures the purge of errored tool-call arguments.
type PurgeErrorsSpec struct {
	// Enabled turns the purge on.
	// +kubebuilder:default=true
	// +optional
	Enabled *bool `json:"enabled,omitempty"`

	// CooldownTurns is how many assistant turns a failed call keeps its arguments.
	// +kubebuilder:default=2
	// +kubebuilder:validation:Minimum=1
	// +optional
	CooldownTurns *int32 `json:"cooldownTurns,omitempty"`

	// MinArgChars is the smallest argument size (JSON characters) that is purged.
	// +kubebuilder:default=500
	// +kubebuilder:validation:Minimum=0
	// +optional
	MinArgChars *int32 `json:"minArgChars,omitempty"`
}

// ObservationHarness names an agent whose observation templates condense knows.
// +kubebuilder:validation:Enum=mini-swe-agent;swe-agent
type ObservationHarness string

// ObservationsSpec configures the pruning of text observations.
type ObservationsSpec struct {
	// Enabled turns observation pruning on.
	// +kubebuilder:default=false
	// +optional
	Enabled *bool `json:"enabled,omitempty"`

	// Harness selects the built-in patterns of one agent; unset selects every built-in one.
	// +optional
	Harness ObservationHarness `json:"harness,omitempty"`

	// Patterns, when set, replace the built-in patterns.
	// +kubebuilder:validation:MaxItems=32
	// +listType=atomic
	// +optional
	Patterns []ObservationPatternSpec `json:"patterns,omitempty"`
}

// ObservationPatternSpec recognises one agent's observations (docs/engine.md).
type ObservationPatternSpec struct {
	// Match is an RE2 regular expression the observation's text must match; its named group
	// "rc" is the command's exit status (not 0: failed).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Match string `json:"match"`

	// Stub is the text that replaces a pruned observation: ${stub} stands for the stub,
	// ${name} for Match's group name. Unset: the stub alone.
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="self.contains('${stub}')",message="stub must contain ${stub}"
	// +optional
	Stub string `json:"stub,omitempty"`

	// Action is an RE2 regular expression over the assistant's text: the first group of its
	// last match is the action. Unset: the whole text.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Action string `json:"action,omitempty"`

	// Tool is the tool name the action is recorded under. Unset: bash.
	// +kubebuilder:validation:MaxLength=128
	// +optional
	Tool string `json:"tool,omitempty"`

	// Failed marks every observation the pattern matches as failed (a timeout template).
	// +optional
	Failed bool `json:"failed,omitempty"`
}

// SummarizerSpec configures the model that writes summaries.
type SummarizerSpec struct {
	// Model is "extractive" (the default: the built-in deterministic summarizer, no LLM call),
	// "default" (summarize with the model of the request being pruned, using the session's own
	// credentials) or a model id of the provider below.
	// +kubebuilder:default=extractive
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +optional
	Model string `json:"model,omitempty"`

	// Provider is the wire format used to call the summarizer: "anthropic" or "openai".
	// +kubebuilder:default=anthropic
	// +optional
	Provider ProviderFormat `json:"provider,omitempty"`

	// BaseURL overrides the upstream base URL for summarizer calls; unset uses the upstream of
	// Provider.
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && url(self).getScheme() in ['http', 'https']",message="baseURL must be an absolute http:// or https:// URL"
	// +optional
	BaseURL string `json:"baseURL,omitempty"`

	// ThinkingBudget is the reasoning effort asked of the summarizer: off, minimal, low, medium,
	// high or xhigh.
	// +kubebuilder:default=off
	// +optional
	ThinkingBudget ThinkingBudget `json:"thinkingBudget,omitempty"`

	// IdleTimeout aborts a summarizer call that streams nothing for this long ("0s" disables).
	// +kubebuilder:default="20s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +optional
	IdleTimeout *metav1.Duration `json:"idleTimeout,omitempty"`

	// TotalTimeout aborts a summarizer call that takes longer than this in total
	// ("0s" disables).
	// +kubebuilder:default="180s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +optional
	TotalTimeout *metav1.Duration `json:"totalTimeout,omitempty"`

	// Credentials holds the summarizer API key. Unset, the proxy reuses the credentials of the
	// request being pruned.
	// +optional
	Credentials *CredentialsSpec `json:"credentials,omitempty"`
}

// CredentialsSpec points at an API key in a Secret of the policy's namespace.
type CredentialsSpec struct {
	// SecretKeyRef selects the Secret key holding the API key.
	// +required
	SecretKeyRef corev1.SecretKeySelector `json:"secretKeyRef"`
}

// UpstreamsSpec holds provider base URLs.
type UpstreamsSpec struct {
	// Anthropic is the Anthropic Messages API base URL.
	// +kubebuilder:default="https://api.anthropic.com"
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && url(self).getScheme() in ['http', 'https']",message="upstreams.anthropic must be an absolute http:// or https:// URL"
	// +optional
	Anthropic string `json:"anthropic,omitempty"`

	// OpenAI is the OpenAI API base URL, including the version path.
	// +kubebuilder:default="https://api.openai.com/v1"
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && url(self).getScheme() in ['http', 'https']",message="upstreams.openai must be an absolute http:// or https:// URL"
	// +optional
	OpenAI string `json:"openai,omitempty"`
}

// SessionAuthSpec configures per-session tokens.
type SessionAuthSpec struct {
	// SecretRef selects the Secret key holding the HMAC secret (at least 16 bytes).
	// +required
	SecretRef corev1.SecretKeySelector `json:"secretRef"`
}

// ProxySpec configures the proxy Deployment.
// +kubebuilder:validation:XValidation:rule="!has(self.autoscaling) || self.autoscaling.minReplicas <= self.autoscaling.maxReplicas",message="proxy.autoscaling.minReplicas must not exceed maxReplicas"
type ProxySpec struct {
	// Replicas is the number of proxy pods (ignored while autoscaling is set).
	// +kubebuilder:default=2
	// +kubebuilder:validation:Minimum=0
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// Image is the condense image; unset uses the operator's default image.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Image string `json:"image,omitempty"`

	// Resources are the proxy container's compute resources. A memory limit also sets the
	// container's GOMEMLIMIT to 90 % of it.
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`

	// Autoscaling, when set, creates a HorizontalPodAutoscaler for the proxy.
	// +optional
	Autoscaling *AutoscalingSpec `json:"autoscaling,omitempty"`

	// ServiceType is the type of the proxy Service.
	// +kubebuilder:default=ClusterIP
	// +kubebuilder:validation:Enum=ClusterIP;NodePort;LoadBalancer
	// +optional
	ServiceType corev1.ServiceType `json:"serviceType,omitempty"`

	// PodTemplate overrides parts of the proxy pod template.
	// +optional
	PodTemplate *PodTemplateOverrides `json:"podTemplate,omitempty"`

	// Limits bound what each proxy accepts, waits for and remembers.
	// +kubebuilder:default={}
	// +optional
	Limits ProxyLimits `json:"limits,omitempty"`
}

// ProxyLimits bound what each proxy accepts, waits for and remembers (the limits of the
// proxy configuration; docs/configuration.md).
// +kubebuilder:validation:XValidation:rule="!has(self.maxBodyBytes) || (quantity(string(self.maxBodyBytes)).isGreaterThan(quantity('0')) && quantity(string(self.maxBodyBytes)).isLessThan(quantity('8Ei')))",message="proxy.limits.maxBodyBytes must be greater than 0 and less than 8Ei"
// +kubebuilder:validation:XValidation:rule="!has(self.parseCacheBytes) || (!quantity(string(self.parseCacheBytes)).isLessThan(quantity('0')) && quantity(string(self.parseCacheBytes)).isLessThan(quantity('8Ei')))",message="proxy.limits.parseCacheBytes must not be negative, and must be less than 8Ei"
type ProxyLimits struct {
	// MaxBodyBytes is the largest request body a proxy accepts; a larger one gets 413.
	// +kubebuilder:default="32Mi"
	// +optional
	MaxBodyBytes *resource.Quantity `json:"maxBodyBytes,omitempty"`

	// FlushWaitTimeout is how long a request waits for an unfinished flush of its session
	// before it goes upstream with the last committed state ("0s": never waits).
	// +kubebuilder:default="0s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +optional
	FlushWaitTimeout *metav1.Duration `json:"flushWaitTimeout,omitempty"`

	// MaxRecoveryRounds bounds the context_tree_query round trips a proxy answers itself
	// within one client request (0: the client always sees the model's calls).
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +optional
	MaxRecoveryRounds *int32 `json:"maxRecoveryRounds,omitempty"`

	// ParseCacheBytes bounds the memory each proxy spends remembering the last request of
	// recent sessions (the least recently used are forgotten first), so that a session's next
	// request is parsed only where it differs ("0": none is remembered). Leave the proxy container about twice this much memory, plus 128Mi.
	// +kubebuilder:default="512Mi"
	// +optional
	ParseCacheBytes *resource.Quantity `json:"parseCacheBytes,omitempty"`
}

// AutoscalingSpec configures the proxy HorizontalPodAutoscaler.
type AutoscalingSpec struct {
	// MinReplicas is the lower replica bound.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +optional
	MinReplicas int32 `json:"minReplicas,omitempty"`

	// MaxReplicas is the upper replica bound.
	// +kubebuilder:validation:Minimum=1
	// +required
	MaxReplicas int32 `json:"maxReplicas"`

	// TargetCPUUtilizationPercentage is the average CPU utilization (of the requested CPU) the
	// autoscaler aims for.
	// +kubebuilder:default=70
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +optional
	TargetCPUUtilizationPercentage int32 `json:"targetCPUUtilizationPercentage,omitempty"`
}

// PodTemplateOverrides are merged into the pods the operator creates.
type PodTemplateOverrides struct {
	// Labels are added to the pod template (the operator's own labels win).
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// Annotations are added to the pod template.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
	// NodeSelector constrains the nodes the pods run on.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// Tolerations let the pods schedule onto tainted nodes.
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
	// Affinity holds scheduling affinity rules.
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`
	// ServiceAccountName runs the pods under this service account.
	// +optional
	ServiceAccountName string `json:"serviceAccountName,omitempty"`
	// PriorityClassName sets the pods' priority class.
	// +optional
	PriorityClassName string `json:"priorityClassName,omitempty"`
	// ImagePullSecrets are used to pull the image.
	// +optional
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`
}

// PrunerSpec configures the pruner worker Deployment.
type PrunerSpec struct {
	// Replicas is the number of `condense pruner` workers; 0 summarizes inside the proxy.
	// +kubebuilder:default=0
	// +kubebuilder:validation:Minimum=0
	// +optional
	Replicas int32 `json:"replicas,omitempty"`

	// Resources are the worker container's compute resources. A memory limit also sets the
	// container's GOMEMLIMIT to 90 % of it.
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`
}

// RedisSpec says where session state lives; setting neither field means a managed Redis with
// default settings. While it is managed, persistence, storage and storageClassName cannot
// change (they shape the StatefulSet's volume claim template); switching to external can.
// +kubebuilder:validation:XValidation:rule="!(has(self.managed) && has(self.external))",message="set at most one of redis.managed and redis.external"
// +kubebuilder:validation:XValidation:rule="has(self.external) || has(oldSelf.external) || (!has(self.managed) || !has(self.managed.persistence) || self.managed.persistence) == (!has(oldSelf.managed) || !has(oldSelf.managed.persistence) || oldSelf.managed.persistence)",message="redis.managed.persistence is immutable: the Redis StatefulSet's volume claim template cannot change; create a new PruningPolicy, or delete this one and its claim data-<policy>-redis-0 and create it again"
// +kubebuilder:validation:XValidation:rule="has(self.external) || has(oldSelf.external) || (has(self.managed) && has(self.managed.persistence) && !self.managed.persistence) || (has(oldSelf.managed) && has(oldSelf.managed.persistence) && !oldSelf.managed.persistence) || quantity(has(self.managed) && has(self.managed.storage) ? string(self.managed.storage) : '1Gi').compareTo(quantity(has(oldSelf.managed) && has(oldSelf.managed.storage) ? string(oldSelf.managed.storage) : '1Gi')) == 0",message="redis.managed.storage is immutable: the Redis StatefulSet's volume claim template cannot change; create a new PruningPolicy, or delete this one and its claim data-<policy>-redis-0 and create it again"
// +kubebuilder:validation:XValidation:rule="has(self.external) || has(oldSelf.external) || (has(self.managed) && has(self.managed.persistence) && !self.managed.persistence) || (has(oldSelf.managed) && has(oldSelf.managed.persistence) && !oldSelf.managed.persistence) || ((has(self.managed) && has(self.managed.storageClassName)) ? (has(oldSelf.managed) && has(oldSelf.managed.storageClassName)) && self.managed.storageClassName == oldSelf.managed.storageClassName : !(has(oldSelf.managed) && has(oldSelf.managed.storageClassName)))",message="redis.managed.storageClassName is immutable: the Redis StatefulSet's volume claim template cannot change; create a new PruningPolicy, or delete this one and its claim data-<policy>-redis-0 and create it again"
type RedisSpec struct {
	// Managed makes the operator run a single-node Redis with append-only persistence.
	// +optional
	Managed *ManagedRedisSpec `json:"managed,omitempty"`

	// External uses a Redis you run, standalone, Sentinel or Cluster.
	// +optional
	External *ExternalRedisSpec `json:"external,omitempty"`
}

// ManagedOrDefault returns the managed Redis settings: Managed when set, empty settings (all
// defaults) when neither Managed nor External is set, nil for an external Redis.
func (r RedisSpec) ManagedOrDefault() *ManagedRedisSpec {
	switch {
	case r.Managed != nil:
		return r.Managed
	case r.External != nil:
		return nil
	default:
		return &ManagedRedisSpec{}
	}
}

// ManagedRedisSpec configures the Redis the operator runs.
type ManagedRedisSpec struct {
	// Image is the Redis image.
	// +kubebuilder:default="redis:7.2"
	// +kubebuilder:validation:MinLength=1
	// +optional
	Image string `json:"image,omitempty"`

	// Persistence keeps data across restarts: a PersistentVolumeClaim per pod and the
	// append-only file (fsync every second). Without it data lives in an emptyDir. Cannot change
	// while the Redis is managed (the StatefulSet's volume claim template is immutable).
	// +kubebuilder:default=true
	// +optional
	Persistence *bool `json:"persistence,omitempty"`

	// Storage is the size of the PersistentVolumeClaim. Cannot change while the Redis is managed
	// with persistence (the StatefulSet's volume claim template is immutable).
	// +kubebuilder:default="1Gi"
	// +optional
	Storage *resource.Quantity `json:"storage,omitempty"`

	// StorageClassName is the StorageClass of the claim; unset uses the cluster default, ""
	// disables dynamic provisioning. Cannot change (nor be set or unset) while the Redis is
	// managed with persistence (the StatefulSet's volume claim template is immutable).
	// +optional
	StorageClassName *string `json:"storageClassName,omitempty"`

	// Resources are the Redis container's compute resources.
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`
}

// ExternalRedisSpec points at a Redis you run.
type ExternalRedisSpec struct {
	// URLSecretRef selects the Secret key holding the store URL: redis://, rediss://,
	// redis+sentinel:// or redis+cluster://, credentials included.
	// +required
	URLSecretRef corev1.SecretKeySelector `json:"urlSecretRef"`

	// Mode is the topology: standalone, sentinel or cluster. It must match the URL scheme.
	// +kubebuilder:default=standalone
	// +optional
	Mode RedisMode `json:"mode,omitempty"`
}

// DiagnosticCounts counts distinct diagnostics by kind.
type DiagnosticCounts struct {
	// Unresolved counts compressed ranges whose boundaries could not be found uniquely ("u").
	// +optional
	Unresolved int64 `json:"unresolved"`
	// Mismatch counts ranges whose dropped ids differ from the recorded ones ("m").
	// +optional
	Mismatch int64 `json:"mismatch"`
	// Orphans counts orphan tool-result sweeps ("o").
	// +optional
	Orphans int64 `json:"orphans"`
	// BackfillEmpty counts chains that could not be backfilled ("b").
	// +optional
	BackfillEmpty int64 `json:"backfillEmpty"`
}

// Total is the sum of all counts.
func (d DiagnosticCounts) Total() int64 {
	return d.Unresolved + d.Mismatch + d.Orphans + d.BackfillEmpty
}

// PruningPolicyStatus is the observed state of a PruningPolicy.
type PruningPolicyStatus struct {
	// ObservedGeneration is the spec generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions are Ready, ProxyAvailable and StoreReachable.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Endpoint is the in-cluster URL agents point their provider base URL at.
	// +optional
	Endpoint string `json:"endpoint,omitempty"`

	// Replicas is the number of proxy pods.
	// +optional
	Replicas int32 `json:"replicas,omitempty"`

	// ReadyReplicas is the number of ready proxy pods.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`

	// Sessions is the number of AgentSessions of this policy.
	// +optional
	Sessions int32 `json:"sessions"`

	// Diagnostics sums the diagnostic counts of all sessions of this policy.
	// +optional
	Diagnostics DiagnosticCounts `json:"diagnostics,omitempty"`

	// ConfigHash is the hash of the proxy configuration currently rendered.
	// +optional
	ConfigHash string `json:"configHash,omitempty"`
}

// PruningPolicy runs a pruning proxy for coding agents and holds the policy it enforces. Its
// name must be a DNS-1035 label of at most 46 characters (checked on create): the Service
// <name>-proxy and the label values of the Redis pods <name>-redis-<hash> are made from it.
// +kubebuilder:validation:XValidation:rule="oldSelf.hasValue() || (self.metadata.name.size() <= 46 && self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$'))",optionalOldSelf=true,message="metadata.name must be a DNS-1035 label of at most 46 characters (lowercase letters, digits and '-', starting with a letter and ending with a letter or digit): the Service <name>-proxy must be a DNS-1035 label, and the Redis StatefulSet <name>-redis labels its pods <name>-redis-<revision hash of up to 10 digits>, which must fit in 63 characters"
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=pp;prunepol,categories=condense
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Endpoint",type=string,JSONPath=`.status.endpoint`
// +kubebuilder:printcolumn:name="Sessions",type=integer,JSONPath=`.status.sessions`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type PruningPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired state.
	// +kubebuilder:default={}
	// +optional
	Spec PruningPolicySpec `json:"spec,omitempty"`
	// Status is the observed state.
	// +optional
	Status PruningPolicyStatus `json:"status,omitempty"`
}

// PruningPolicyList is a list of PruningPolicies.
// +kubebuilder:object:root=true
type PruningPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the policies.
	// +required
	Items []PruningPolicy `json:"items"`
}

func init() {
	SchemeBuilder.Register(&PruningPolicy{}, &PruningPolicyList{})
}

// IdleTimeoutDuration returns IdleTimeout as a time.Duration, or nil when unset.
func (s *SummarizerSpec) IdleTimeoutDuration() *time.Duration {
	if s.IdleTimeout == nil {
		return nil
	}
	return &s.IdleTimeout.Duration
}

// FlushWaitTimeoutDuration returns FlushWaitTimeout as a time.Duration, or nil when unset.
func (l *ProxyLimits) FlushWaitTimeoutDuration() *time.Duration {
	if l.FlushWaitTimeout == nil {
		return nil
	}
	return &l.FlushWaitTimeout.Duration
}

// TotalTimeoutDuration returns TotalTimeout as a time.Duration, or nil when unset.
func (s *SummarizerSpec) TotalTimeoutDuration() *time.Duration {
	if s.TotalTimeout == nil {
		return nil
	}
	return &s.TotalTimeout.Duration
}
