package store

import (
	"slices"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
)

// UnmarshalTaskSpecPartial decodes an encoded TaskSpecRecord as Reader.GetTaskSpecPartial
// returns it: without the resolved spec and, unless withSubmitted, without the
// submitted agent and graph, which are stepped over undecoded.
func UnmarshalTaskSpecPartial(v []byte, withSubmitted bool) (*storagev1.TaskSpecRecord, error) {
	skip := specFieldsResolved
	if !withSubmitted {
		skip = specFieldsLarge
	}
	spec := &storagev1.TaskSpecRecord{}
	return spec, unmarshalWithout(v, spec, skip)
}

// The TaskSpecRecord fields a partial read leaves undecoded: the resolved spec, and
// with it the submitted agent and graph.
var (
	specFieldsResolved = []protowire.Number{fieldNumber(&storagev1.TaskSpecRecord{}, "resolved_spec")}
	specFieldsLarge    = append([]protowire.Number{
		fieldNumber(&storagev1.TaskSpecRecord{}, "agent"),
		fieldNumber(&storagev1.TaskSpecRecord{}, "graph"),
	}, specFieldsResolved...)
)

func fieldNumber(m proto.Message, name protoreflect.Name) protowire.Number {
	return m.ProtoReflect().Descriptor().Fields().ByName(name).Number()
}

// unmarshalWithout decodes the encoded message v into m, except its top-level fields
// skip, which it steps over by their length prefix. Each kept field is merged in as it
// comes, which is what decoding the whole of v does, without copying v.
func unmarshalWithout(v []byte, m proto.Message, skip []protowire.Number) error {
	merge := proto.UnmarshalOptions{Merge: true}
	for b := v; len(b) > 0; {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		l := protowire.ConsumeFieldValue(num, typ, b[n:])
		if l < 0 {
			return protowire.ParseError(l)
		}
		if !slices.Contains(skip, num) {
			if err := merge.Unmarshal(b[:n+l], m); err != nil {
				return err
			}
		}
		b = b[n+l:]
	}
	return nil
}
