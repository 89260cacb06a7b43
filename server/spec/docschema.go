package spec

import _ "embed"

//go:embed document.schema.json
var documentSchema []byte

// DocumentSchema returns a JSON Schema (draft 2020-12) of qar/v1 documents, for
// editors (completion, inline errors) and for tools that want a quick structural
// check. It describes the document shape; the validator's rules go further (unique
// names, references, deployment limits), so a document the schema accepts can still
// be invalid. The returned slice is a copy.
func DocumentSchema() []byte {
	return append([]byte(nil), documentSchema...)
}
