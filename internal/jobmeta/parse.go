package jobmeta

import (
	"fmt"
	"strings"
)

// MetadataError is one problem in a metadata string. Pos is the 1-based
// column (in bytes) of the offending key=value in the input.
type MetadataError struct {
	Pos   int
	Key   string
	Value string
	Msg   string
	Hint  string
}

func (e *MetadataError) Error() string {
	s := fmt.Sprintf("burst metadata, column %d", e.Pos)
	if e.Key != "" {
		s += fmt.Sprintf(" (%s)", e.Key)
	}
	s += ": " + e.Msg
	if e.Hint != "" {
		s += "; " + e.Hint
	}
	return s
}

// metadataKeys lists every key (shown for unknown keys).
var metadataKeys = []string{"params", "dataset", "tokens", "epochs", "deadline", "workload", "method", "precision", "sharding",
	"seq", "batch", "context", "layers", "hidden", "heads", "kv_heads", "latency", "throughput",
	"checkpoint", "checkpoint_signal", "checkpoint_to", "rebalance", "capacity"}

// Keys returns every metadata key burst understands.
func Keys() []string { return append([]string(nil), metadataKeys...) }

// ParseMetadata parses burst metadata out of a job comment (or --extra
// string). Only the text after the first "burst:" is read; a comment without
// it carries no metadata and yields no errors. The body is whitespace- or
// comma-separated key=value pairs:
//
//	burst: params=7B dataset=2TB deadline=8h workload=finetune precision=bf16 checkpoint=30m
//
// Every unknown key, repeated key and malformed value is returned as a
// *MetadataError with its column and a hint; valid pairs are still applied.
// Values may only contain letters, digits and . _ - + : / % — anything a shell
// could interpret is refused.
func ParseMetadata(comment string) (Metadata, []error) {
	var md Metadata
	i := strings.Index(comment, MetadataPrefix)
	if i < 0 {
		return md, nil
	}
	return parseBody(comment, i+len(MetadataPrefix))
}

func parseBody(s string, start int) (Metadata, []error) {
	var md Metadata
	var errs []error
	seen := map[string]bool{}
	cols := map[string]int{}
	pos := start
	for pos < len(s) {
		for pos < len(s) && isSep(s[pos]) {
			pos++
		}
		if pos >= len(s) {
			break
		}
		end := pos
		for end < len(s) && !isSep(s[end]) {
			end++
		}
		tok := s[pos:end]
		col := pos + 1
		pos = end
		key, val, ok := strings.Cut(tok, "=")
		if !ok {
			errs = append(errs, &MetadataError{Pos: col, Key: tok, Msg: fmt.Sprintf("%q is not key=value", tok), Hint: "write pairs like params=7B, separated by spaces"})
			continue
		}
		key = strings.ToLower(key)
		if bad := shellUnsafe(val); bad != 0 {
			errs = append(errs, &MetadataError{Pos: col, Key: key, Value: val, Msg: fmt.Sprintf("value contains %s, which is not allowed", showRune(bad)), Hint: "values may use only letters, digits and . _ - + : / %"})
			continue
		}
		if seen[key] {
			errs = append(errs, &MetadataError{Pos: col, Key: key, Value: val, Msg: "key given twice", Hint: "give each key once"})
			continue
		}
		if err := md.set(key, val); err != nil {
			err.Pos = col
			errs = append(errs, err)
			continue
		}
		seen[key] = true
		cols[key] = col
		md.Keys = append(md.Keys, key)
	}
	for _, e := range md.crossCheck(cols) {
		errs = append(errs, e)
	}
	return md, errs
}

// crossCheck reports keys that contradict each other, each at the column of
// the key that does not apply.
func (md *Metadata) crossCheck(cols map[string]int) []*MetadataError {
	var errs []*MetadataError
	bad := func(key, msg, hint string) {
		errs = append(errs, &MetadataError{Pos: cols[key], Key: key, Msg: msg, Hint: hint})
	}
	if md.Workload == WorkloadInference {
		if _, ok := cols["method"]; ok {
			bad("method", "method= applies to finetune and train, not to workload=inference", "drop method=, or say workload=finetune")
		}
		if _, ok := cols["sharding"]; ok {
			bad("sharding", "sharding= applies to training state; inference weights are split over the GPUs (tensor parallel) anyway", "drop sharding=")
		}
	}
	if md.Workload == WorkloadFinetune || md.Workload == WorkloadTrain || md.Method != MethodUnknown {
		for _, k := range []string{"latency", "throughput", "context"} {
			if _, ok := cols[k]; ok {
				bad(k, k+"= is an inference setting; this job trains", "use workload=inference, or for training give seq= and deadline=")
			}
		}
	}
	if t := md.TrainTokens(); t > MaxTrainTokens {
		key := "epochs"
		if _, ok := cols[key]; !ok {
			key = "tokens"
			if _, ok := cols[key]; !ok {
				key = "dataset"
			}
		}
		bad(key, fmt.Sprintf("the job would process %s tokens (tokens or dataset/%g bytes, times epochs), above the most burst accepts (%s)", formatCount(t), BytesPerToken, formatCount(MaxTrainTokens)),
			"1P tokens is 64x the largest published training corpus (Llama 3, 15.6T); check tokens=, dataset= and epochs=")
	}
	if md.KVHeads > 0 && md.Heads > 0 && md.KVHeads > md.Heads {
		bad("kv_heads", fmt.Sprintf("kv_heads=%d is more than heads=%d", md.KVHeads, md.Heads), "key/value heads are at most the attention heads (equal without grouped-query attention)")
	}
	return errs
}

func isSep(c byte) bool { return c == ' ' || c == '\t' || c == ',' || c == '\n' || c == '\r' }

// shellUnsafe returns the first character of v outside the allowed set, or 0.
func shellUnsafe(v string) rune {
	for _, c := range v { // by rune: a message shows the character, not a byte of it
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c < 0x80 && strings.IndexByte("._-+:/%", byte(c)) >= 0:
		default:
			return c
		}
	}
	return 0
}

// showRune is a character for a message: quoted, with its code point when
// it is not ASCII ('７' (U+FF17)), an invalid byte as U+FFFD.
func showRune(r rune) string {
	if r < 0x80 {
		return fmt.Sprintf("%q", r)
	}
	return fmt.Sprintf("%q (U+%04X)", r, r)
}

// Combine is the metadata text of a job from both places Slurm keeps it:
// --comment, and --extra (23.02+, where sites that use the comment for
// something else put burst's metadata). Either may carry the "burst:"
// prefix; --extra alone may omit it. A key given in both is reported by
// the parser ("key given twice") and --comment's applies.
func Combine(comment, extra string) string {
	extra = strings.TrimSpace(extra)
	if extra == "" {
		return comment
	}
	body := strings.TrimSpace(strings.TrimPrefix(extra, MetadataPrefix))
	if i := strings.Index(extra, MetadataPrefix); i > 0 {
		body = strings.TrimSpace(extra[i+len(MetadataPrefix):])
	}
	if strings.Contains(comment, MetadataPrefix) {
		return comment + " " + body
	}
	return MetadataPrefix + " " + body
}
