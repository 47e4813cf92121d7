package espeak

/*
#include <stdlib.h>
#include <string.h>
#include <espeak-ng/speak_lib.h>

// The voice variants ("+f3", "+klatt"): espeak lists them as the voices of the
// language "variant".
static const espeak_VOICE **parley_list_variants(void) {
	espeak_VOICE spec;
	memset(&spec, 0, sizeof spec);
	spec.languages = "variant";
	return espeak_ListVoices(&spec);
}
*/
import "C"

import (
	"cmp"
	"fmt"
	"path"
	"slices"
	"strings"
	"unsafe"
)

// VoiceError says that a voice is not one of espeak-ng's. espeak-ng would pick the
// nearest language for it ("en-zz" speaks en) without a word: the voice is checked
// against the installed voices first. It wraps ErrVoiceNotFound.
type VoiceError struct {
	Voice string
	// Close are the installed voices whose names are closest to Voice.
	Close []string
}

func (e *VoiceError) Error() string {
	close := ""
	if len(e.Close) > 0 {
		close = "; close: " + strings.Join(e.Close, ", ")
	}
	return fmt.Sprintf("%q is not one of espeak-ng's voices%s ('agent say --voices' lists them)", e.Voice, close)
}

// Is makes errors.Is(err, ErrVoiceNotFound) true.
func (e *VoiceError) Is(target error) bool { return target == ErrVoiceNotFound }

// checkVoice returns a *VoiceError unless name is an installed voice: its name, its
// identifier (with or without its folder, "gmw/en-US" or "en-US") or one of its
// languages ("en-us", "en"), case aside, with an optional variant after '+' ("en-us+f3")
// that is one of the installed variants. It runs on the owner goroutine.
func checkVoice(name string) error {
	base, variant, hasVariant := strings.Cut(name, "+")
	voices := listVoices(C.espeak_ListVoices(nil))
	names := voiceNames(voices)
	if hasVariant {
		variants := voiceNames(listVoices(C.parley_list_variants()))
		if !slices.Contains(variants, strings.ToLower(variant)) {
			return &VoiceError{Voice: name, Close: closeNames(strings.ToLower(variant), variants)}
		}
	}
	if slices.Contains(names, strings.ToLower(base)) {
		return nil
	}
	return &VoiceError{Voice: name, Close: closeNames(strings.ToLower(base), names)}
}

// listVoices reads espeak's NULL-terminated voice list (owned by the library).
func listVoices(list **C.espeak_VOICE) []Voice {
	if list == nil {
		return nil
	}
	var out []Voice
	for _, v := range unsafe.Slice(list, 1<<16) {
		if v == nil {
			break
		}
		out = append(out, Voice{
			Name:       C.GoString(v.name),
			Identifier: C.GoString(v.identifier),
			Languages:  parseLanguages(v.languages),
			Gender:     int(v.gender),
		})
	}
	return out
}

// voiceNames returns every name a voice may be asked by, lower case, sorted, once each.
func voiceNames(voices []Voice) []string {
	var names []string
	for _, v := range voices {
		for _, n := range append([]string{v.Name, v.Identifier, path.Base(v.Identifier)}, v.Languages...) {
			if n != "" && n != "." {
				names = append(names, strings.ToLower(n))
			}
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// closeNames returns up to 8 of names closest to name: those within two edits, and those
// of the same language (the part before '-'), nearest first.
func closeNames(name string, names []string) []string {
	type scored struct {
		name string
		d    int
	}
	lang, _, _ := strings.Cut(name, "-")
	var hits []scored
	for _, n := range names {
		d := editDistance(name, n)
		nl, _, _ := strings.Cut(n, "-")
		if d <= 2 || (lang != "" && nl == lang) {
			hits = append(hits, scored{n, d})
		}
	}
	slices.SortStableFunc(hits, func(a, b scored) int { return cmp.Compare(a.d, b.d) })
	out := make([]string, 0, 8)
	for _, h := range hits {
		if len(out) == cap(out) {
			break
		}
		out = append(out, h.name)
	}
	return out
}

// editDistance is the Levenshtein distance between a and b, by bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
