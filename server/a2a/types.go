package a2a

import "encoding/json"

// The A2A v1.0 wire shapes (ProtoJSON of the spec's a2a.proto: camelCase fields,
// enum names as strings, oneofs as the set field's name). Only what this server reads
// or writes is declared; unknown request fields are ignored, as ProtoJSON allows.

// Task states and roles, as A2A v1.0 spells them.
const (
	stateSubmitted     = "TASK_STATE_SUBMITTED"
	stateWorking       = "TASK_STATE_WORKING"
	stateInputRequired = "TASK_STATE_INPUT_REQUIRED"
	stateCompleted     = "TASK_STATE_COMPLETED"
	stateFailed        = "TASK_STATE_FAILED"
	stateCanceled      = "TASK_STATE_CANCELED"
	stateRejected      = "TASK_STATE_REJECTED"
	stateAuthRequired  = "TASK_STATE_AUTH_REQUIRED"

	roleUser  = "ROLE_USER"
	roleAgent = "ROLE_AGENT"
)

func terminalState(s string) bool {
	switch s {
	case stateCompleted, stateFailed, stateCanceled, stateRejected:
		return true
	}
	return false
}

// interruptedState: a blocking SendMessage returns, and a stream closes, on these too.
func interruptedState(s string) bool { return s == stateInputRequired || s == stateAuthRequired }

type part struct {
	Text      *string         `json:"text,omitempty"`
	Raw       []byte          `json:"raw,omitempty"`
	URL       string          `json:"url,omitempty"`
	Data      json.RawMessage `json:"data,omitempty"`
	Metadata  map[string]any  `json:"metadata,omitempty"`
	Filename  string          `json:"filename,omitempty"`
	MediaType string          `json:"mediaType,omitempty"`
}

type message struct {
	MessageID        string         `json:"messageId"`
	ContextID        string         `json:"contextId,omitempty"`
	TaskID           string         `json:"taskId,omitempty"`
	Role             string         `json:"role"`
	Parts            []part         `json:"parts"`
	Metadata         map[string]any `json:"metadata,omitempty"`
	Extensions       []string       `json:"extensions,omitempty"`
	ReferenceTaskIDs []string       `json:"referenceTaskIds,omitempty"`
}

type taskStatus struct {
	State     string   `json:"state"`
	Message   *message `json:"message,omitempty"`
	Timestamp string   `json:"timestamp,omitempty"`
}

type artifact struct {
	ArtifactID  string         `json:"artifactId"`
	Name        string         `json:"name,omitempty"`
	Description string         `json:"description,omitempty"`
	Parts       []part         `json:"parts"`
	Metadata    map[string]any `json:"metadata,omitempty"`
}

type task struct {
	ID        string         `json:"id"`
	ContextID string         `json:"contextId"`
	Status    taskStatus     `json:"status"`
	Artifacts []artifact     `json:"artifacts,omitempty"`
	History   []message      `json:"history,omitempty"`
	Metadata  map[string]any `json:"metadata,omitempty"`
}

type statusUpdate struct {
	TaskID    string         `json:"taskId"`
	ContextID string         `json:"contextId"`
	Status    taskStatus     `json:"status"`
	Metadata  map[string]any `json:"metadata,omitempty"`
}

type artifactUpdate struct {
	TaskID    string   `json:"taskId"`
	ContextID string   `json:"contextId"`
	Artifact  artifact `json:"artifact"`
	Append    bool     `json:"append,omitempty"`
	LastChunk bool     `json:"lastChunk,omitempty"`
}

// streamResponse is the StreamResponse oneof (also SendMessageResponse's, with only
// task or message set, and a push notification's body).
type streamResponse struct {
	Task           *task           `json:"task,omitempty"`
	Message        *message        `json:"message,omitempty"`
	StatusUpdate   *statusUpdate   `json:"statusUpdate,omitempty"`
	ArtifactUpdate *artifactUpdate `json:"artifactUpdate,omitempty"`
}

type sendConfig struct {
	AcceptedOutputModes []string    `json:"acceptedOutputModes,omitempty"`
	PushConfig          *pushConfig `json:"taskPushNotificationConfig,omitempty"`
	HistoryLength       *int32      `json:"historyLength,omitempty"`
	ReturnImmediately   bool        `json:"returnImmediately,omitempty"`
}

type sendRequest struct {
	Tenant        string         `json:"tenant,omitempty"`
	Message       *message       `json:"message"`
	Configuration *sendConfig    `json:"configuration,omitempty"`
	Metadata      map[string]any `json:"metadata,omitempty"`
}

type getTaskRequest struct {
	Tenant        string `json:"tenant,omitempty"`
	ID            string `json:"id"`
	HistoryLength *int32 `json:"historyLength,omitempty"`
}

type listTasksRequest struct {
	Tenant               string `json:"tenant,omitempty"`
	ContextID            string `json:"contextId,omitempty"`
	Status               string `json:"status,omitempty"`
	PageSize             *int32 `json:"pageSize,omitempty"`
	PageToken            string `json:"pageToken,omitempty"`
	HistoryLength        *int32 `json:"historyLength,omitempty"`
	StatusTimestampAfter string `json:"statusTimestampAfter,omitempty"`
	IncludeArtifacts     *bool  `json:"includeArtifacts,omitempty"`
}

type listTasksResponse struct {
	Tasks         []task `json:"tasks"`
	NextPageToken string `json:"nextPageToken"`
	PageSize      int32  `json:"pageSize"`
	TotalSize     int32  `json:"totalSize"`
}

type taskIDRequest struct {
	Tenant   string         `json:"tenant,omitempty"`
	ID       string         `json:"id"`
	Metadata map[string]any `json:"metadata,omitempty"`
}

type authenticationInfo struct {
	Scheme      string `json:"scheme"`
	Credentials string `json:"credentials,omitempty"`
}

// pushConfig is TaskPushNotificationConfig.
type pushConfig struct {
	Tenant         string              `json:"tenant,omitempty"`
	ID             string              `json:"id,omitempty"`
	TaskID         string              `json:"taskId,omitempty"`
	URL            string              `json:"url"`
	Token          string              `json:"token,omitempty"`
	Authentication *authenticationInfo `json:"authentication,omitempty"`
}

// The agent card.

type agentInterface struct {
	URL             string `json:"url"`
	ProtocolBinding string `json:"protocolBinding"`
	Tenant          string `json:"tenant,omitempty"`
	ProtocolVersion string `json:"protocolVersion"`
}

type agentProvider struct {
	URL          string `json:"url"`
	Organization string `json:"organization"`
}

type agentExtension struct {
	URI         string         `json:"uri"`
	Description string         `json:"description,omitempty"`
	Required    bool           `json:"required,omitempty"`
	Params      map[string]any `json:"params,omitempty"`
}

type agentCapabilities struct {
	Streaming         bool             `json:"streaming"`
	PushNotifications bool             `json:"pushNotifications"`
	Extensions        []agentExtension `json:"extensions,omitempty"`
	ExtendedAgentCard bool             `json:"extendedAgentCard"`
}

type agentSkill struct {
	ID          string   `json:"id"`
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Tags        []string `json:"tags"`
	Examples    []string `json:"examples,omitempty"`
	InputModes  []string `json:"inputModes,omitempty"`
	OutputModes []string `json:"outputModes,omitempty"`
}

type stringList struct {
	List []string `json:"list"`
}

type securityRequirement struct {
	Schemes map[string]stringList `json:"schemes"`
}

// securityScheme carries both spellings of a scheme: v1.0's oneof field
// (httpAuthSecurityScheme, mtlsSecurityScheme) and 0.3's "type" discriminator with its
// fields inline, so that one card serves clients of both versions.
type securityScheme struct {
	HTTPAuth *httpAuthScheme `json:"httpAuthSecurityScheme,omitempty"`
	MTLS     *mtlsScheme     `json:"mtlsSecurityScheme,omitempty"`
	// 0.3
	Type         string `json:"type"`
	Scheme       string `json:"scheme,omitempty"`
	BearerFormat string `json:"bearerFormat,omitempty"`
	Description  string `json:"description,omitempty"`
}

type httpAuthScheme struct {
	Description  string `json:"description,omitempty"`
	Scheme       string `json:"scheme"`
	BearerFormat string `json:"bearerFormat,omitempty"`
}

type mtlsScheme struct {
	Description string `json:"description,omitempty"`
}

// legacyInterface is 0.3's AgentInterface.
type legacyInterface struct {
	URL       string `json:"url"`
	Transport string `json:"transport"`
}

type agentCard struct {
	Name                 string                    `json:"name"`
	Description          string                    `json:"description"`
	SupportedInterfaces  []agentInterface          `json:"supportedInterfaces"`
	Provider             *agentProvider            `json:"provider,omitempty"`
	Version              string                    `json:"version"`
	DocumentationURL     string                    `json:"documentationUrl,omitempty"`
	Capabilities         agentCapabilities         `json:"capabilities"`
	SecuritySchemes      map[string]securityScheme `json:"securitySchemes,omitempty"`
	SecurityRequirements []securityRequirement     `json:"securityRequirements,omitempty"`
	DefaultInputModes    []string                  `json:"defaultInputModes"`
	DefaultOutputModes   []string                  `json:"defaultOutputModes"`
	Skills               []agentSkill              `json:"skills"`

	// 0.3 fields, read by 0.3 clients and ignored by 1.0 ones (a card with
	// supportedInterfaces is a 1.0 card to a 1.0 client).
	ProtocolVersion                   string                `json:"protocolVersion"`
	URL                               string                `json:"url"`
	PreferredTransport                string                `json:"preferredTransport"`
	AdditionalInterfaces              []legacyInterface     `json:"additionalInterfaces,omitempty"`
	Security                          []map[string][]string `json:"security,omitempty"`
	SupportsAuthenticatedExtendedCard bool                  `json:"supportsAuthenticatedExtendedCard,omitempty"`
}
