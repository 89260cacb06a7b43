package spec

import (
	"slices"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

// Vocabulary is the closed sets this validator accepts, for GetCapabilities. It is
// built from the same lists the rules check against, so it cannot drift from them.
func Vocabulary() *agentplanev1.SpecVocabulary {
	return &agentplanev1.SpecVocabulary{
		ApiVersions:        []string{APIVersion},
		Kinds:              []string{KindAgent, KindGraph},
		Roles:              slices.Clone(roles),
		EdgeKinds:          slices.Clone(edgeKinds),
		HitlModes:          slices.Clone(hitlModes),
		TerminationKinds:   slices.Clone(terminationKinds),
		InstructionPresets: slices.Clone(knownPresets),
	}
}
