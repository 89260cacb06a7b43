package a2a

import (
	"encoding/json"
	"net/url"
	"testing"
)

// FuzzDecoders: whatever a caller sends, the request decoders (1.0 and 0.3 message
// params, parts, tool results, REST routes and query parameters) answer an error or a
// value, never a panic.
func FuzzDecoders(f *testing.F) {
	f.Add([]byte(`{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"x"},{"data":{"callId":"c","result":1}},{"raw":"AAE="},{"url":"https://e"}]}}`), "/tasks/a:cancel", "historyLength=3&includeArtifacts=true")
	f.Add([]byte(`{"message":{"kind":"message","messageId":"m","role":"user","parts":[{"kind":"file","file":{"bytes":"!!"}}]},"configuration":{"blocking":false,"historyLength":-9}}`), "/tasks/%zz:subscribe", "pageSize=x")
	f.Add([]byte(`{"message":{"parts":[{"data":[1,2]},{"data":null}]}}`), "/tasks//pushNotificationConfigs/1", "status=%")
	f.Fuzz(func(t *testing.T, body []byte, path, query string) {
		var req sendRequest
		if json.Unmarshal(body, &req) == nil && req.Message != nil {
			_, _ = inboundMessage(req.Message)
			_, _, _ = toolOutputs(req.Message)
		}
		if legacy, err := fromLegacySend(body); err == nil && legacy.Message != nil {
			_, _ = inboundMessage(legacy.Message)
		}
		_, _ = restRoute("POST", path)
		_, _ = restRoute("GET", path)
		if q, err := url.ParseQuery(query); err == nil {
			_, _ = queryParams(q)
		}
	})
}
