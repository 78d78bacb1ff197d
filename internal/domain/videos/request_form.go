package videos

import (
	"encoding/json"
	"regexp"
	"strings"

	"videogen/internal/refusal"
)

// FormValue is one text part of a multipart/form-data create body, in the order it came.
type FormValue struct {
	Name, Value string
}

// FormFile is the input_reference file part of a multipart create, already stored (media.Batch) as an
// upload's would be: its signed URL, and its SHA-256 so that a retry, which stores the bytes anew under
// another id, hashes as the same request.
type FormFile struct {
	URL, SHA256 string
}

// Kinds of create fields, for reading their text as JSON.
var (
	formLists = map[string]bool{"image_urls": true, "video_urls": true, "audio_urls": true}
	formBools = map[string]bool{"generate_audio": true, "watermark": true}
	// seed is the one field JSON takes only as a number: its text goes in as a number when it is one.
	formNumbers = map[string]bool{"seed": true}
)

var integerText = regexp.MustCompile(`^-?[0-9]{1,20}$`)

// ParseCreateForm validates a create body sent as multipart/form-data text fields, as OpenAI's SDKs send
// it. The fields become the JSON members the same request would have as JSON, and then the very rules of
// ParseCreate apply, so the two forms accept and refuse exactly the same requests and make the same
// CreateRequest (hence the same Idempotency-Key hash). A text field is a JSON string, except:
//   - image_urls, video_urls, audio_urls are arrays, of the repeated fields "name" or "name[]" (both
//     forms of arrays in use; OpenAI's SDKs send "name[]");
//   - generate_audio and watermark are booleans when their text is true or false;
//   - seed is a number when its text is an integer;
//   - input_reference[image_url] (and input_reference[file_id], input_reference[…]) are the members of
//     the object input_reference, as OpenAI's SDKs send the {"image_url"} form of it;
//
// and anything else stays a string, refused by the same rule as in JSON. seconds and duration need no
// case of their own: JSON takes them as strings of digits. A field given twice is refused, where JSON
// would keep the last silently: a form that repeats it is ambiguous, and guessing could bill the wrong
// video. file, when not nil, is the input_reference the form carried as a file part; it may not come
// with input_reference text parts as well.
func ParseCreateForm(form []FormValue, file *FormFile, policy MediaPolicy) (*CreateRequest, *refusal.Error) {
	fields := map[string]json.RawMessage{}
	lists := map[string][]string{}
	var ref map[string]json.RawMessage // the members of input_reference given as input_reference[name]
	for _, f := range form {
		name := f.Name
		if member, ok := inputReferenceMember(name); ok {
			if file != nil {
				return nil, refusal.Field("conflicting_fields", "input_reference", "input_reference is given both as a file part and as the text part %s; send one of them.", truncate(name, 100))
			}
			if ref == nil {
				ref = map[string]json.RawMessage{}
			}
			if _, dup := ref[member]; dup {
				return nil, refusal.Field("invalid_request", truncate(name, 100), "The field %s is given twice; send it once.", truncate(name, 100))
			}
			ref[member], _ = json.Marshal(f.Value)
			continue
		}
		if name == "input_reference" && file != nil {
			return nil, refusal.Field("conflicting_fields", "input_reference", "input_reference is given both as a file part and as a text part; send the image once.")
		}
		if base, ok := strings.CutSuffix(name, "[]"); ok && formLists[base] {
			name = base
		}
		if formLists[name] {
			lists[name] = append(lists[name], f.Value)
			continue
		}
		if _, dup := fields[name]; dup {
			return nil, refusal.Field("invalid_request", name, "The field %s is given twice; send it once (only image_urls, video_urls and audio_urls repeat).", truncate(name, 100))
		}
		fields[name] = formText(name, f.Value)
	}
	for name, values := range lists {
		fields[name], _ = json.Marshal(values)
	}
	if ref != nil {
		if _, dup := fields["input_reference"]; dup {
			return nil, refusal.Field("invalid_request", "input_reference", "input_reference is given both as text and as input_reference[…] parts; send input_reference[image_url] only.")
		}
		fields["input_reference"], _ = json.Marshal(ref)
	}
	if file != nil {
		// The stored file is the input_reference member; readInputReference takes it from p.file.
		fields["input_reference"] = json.RawMessage(`{}`)
	}
	return parseFields(fields, policy, file)
}

// inputReferenceMember reads a part named input_reference[member], the SDKs' spelling of a member of
// the input_reference object.
func inputReferenceMember(name string) (string, bool) {
	rest, ok := strings.CutPrefix(name, "input_reference[")
	if !ok {
		return "", false
	}
	member, ok := strings.CutSuffix(rest, "]")
	return member, ok && member != "" && !strings.ContainsAny(member, "[]")
}

// formText is a text field as the JSON member it stands for.
func formText(name, value string) json.RawMessage {
	switch {
	case formBools[name] && (value == "true" || value == "false"):
		return json.RawMessage(value)
	case formNumbers[name] && integerText.MatchString(value):
		return json.RawMessage(value)
	}
	// Marshalling a string cannot fail; invalid UTF-8 becomes U+FFFD, as JSON decoding does with a body.
	b, _ := json.Marshal(value)
	return b
}
