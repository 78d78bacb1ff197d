package videos_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"videogen/internal/domain/media"
	"videogen/internal/domain/videos"
	"videogen/internal/refusal"
)

// TestFormIsTheJSONRequest: a create body sent as multipart text fields is the JSON body with the same
// members — accepted as the same CreateRequest with the same Idempotency-Key hash, or refused with the
// same code and param — except where a form has a shape JSON has not (repeated fields, "name[]").
func TestFormIsTheJSONRequest(t *testing.T) {
	signer := media.NewSigner("https://api.example.com", []string{"a test secret of enough length"})
	policy := videos.MediaPolicy{Signer: signer, Now: time.Now}
	img1 := signer.URL("file_"+strings.Repeat("a", 24), time.Now().Add(time.Hour))
	img2 := signer.URL("file_"+strings.Repeat("b", 24), time.Now().Add(time.Hour))
	vid := signer.URL("file_"+strings.Repeat("c", 24), time.Now().Add(time.Hour))
	type fv = videos.FormValue
	base := []fv{{"model", "videogen-2.0-720p"}, {"prompt", "a red fox"}}
	with := func(extra ...fv) []fv { return append(append([]fv{}, base...), extra...) }
	const jsonBase = `"model":"videogen-2.0-720p","prompt":"a red fox"`
	cases := []struct {
		name string
		form []fv
		json string // the same request as JSON; "" when the form has no JSON twin
		code string // "" when accepted
		// param of the refusal
		param string
	}{
		{"minimal", base, `{` + jsonBase + `}`, "", ""},
		{"openai-go's fields (seconds and size as strings)", with(fv{"seconds", "8"}, fv{"size", "720x1280"}), `{` + jsonBase + `,"seconds":"8","size":"720x1280"}`, "", ""},
		{"seconds as a JSON number is the same request", with(fv{"seconds", "8"}), `{` + jsonBase + `,"seconds":8}`, "", ""},
		{"duration", with(fv{"duration", "6"}), `{` + jsonBase + `,"duration":6}`, "", ""},
		{"ratio", with(fv{"aspect_ratio", "9:16"}), `{` + jsonBase + `,"aspect_ratio":"9:16"}`, "", ""},
		{"booleans", with(fv{"generate_audio", "true"}, fv{"watermark", "false"}), `{` + jsonBase + `,"generate_audio":true,"watermark":false}`, "", ""},
		{"seed", with(fv{"seed", "42"}), `{` + jsonBase + `,"seed":42}`, "", ""},
		{"seed -1 is random", with(fv{"seed", "-1"}), `{` + jsonBase + `}`, "", ""},
		{"repeated image_urls", with(fv{"image_urls", img1}, fv{"image_urls", img2}), `{` + jsonBase + `,"image_urls":["` + img1 + `","` + img2 + `"]}`, "", ""},
		{"image_urls[] (the SDKs' form)", with(fv{"image_urls[]", img1}, fv{"image_urls[]", img2}), `{` + jsonBase + `,"image_urls":["` + img1 + `","` + img2 + `"]}`, "", ""},
		{"every media field", with(fv{"video_urls[]", vid}, fv{"start_image_url", img1}, fv{"end_image_url", img2}), `{` + jsonBase + `,"video_urls":["` + vid + `"],"start_image_url":"` + img1 + `","end_image_url":"` + img2 + `"}`, "", ""},
		{"invalid UTF-8 replaced as in JSON", []fv{{"model", "videogen-2.0-720p"}, {"prompt", "caf\xe9"}}, "{\"model\":\"videogen-2.0-720p\",\"prompt\":\"caf\xe9\"}", "", ""},
		// refusals: the same code and param as the JSON twin
		{"no fields", nil, `{}`, "missing_field", "model"},
		{"unknown field", with(fv{"n", "2"}), `{` + jsonBase + `,"n":"2"}`, "unknown_field", "n"},
		{"input_reference[image_url] (openai-go's {image_url} form)", with(fv{"input_reference[image_url]", img1}), `{` + jsonBase + `,"input_reference":{"image_url":"` + img1 + `"}}`, "", ""},
		{"input_reference[image_url] not ours", with(fv{"input_reference[image_url]", "https://x.example/a.png"}), `{` + jsonBase + `,"input_reference":{"image_url":"https://x.example/a.png"}}`, "invalid_media_url", "input_reference.image_url"},
		{"input_reference[file_id]", with(fv{"input_reference[file_id]", "file-abc"}), `{` + jsonBase + `,"input_reference":{"file_id":"file-abc"}}`, "file_id_not_supported", "input_reference.file_id"},
		{"input_reference[image_url] and start_image_url", with(fv{"input_reference[image_url]", img1}, fv{"start_image_url", img2}), `{` + jsonBase + `,"input_reference":{"image_url":"` + img1 + `"},"start_image_url":"` + img2 + `"}`, "conflicting_fields", "input_reference"},
		{"input_reference[other]", with(fv{"input_reference[url]", img1}), `{` + jsonBase + `,"input_reference":{"url":"` + img1 + `"}}`, "unknown_field", "input_reference.url"},
		{"input_reference as a URL", with(fv{"input_reference", "https://x.example/a.png"}), `{` + jsonBase + `,"input_reference":"https://x.example/a.png"}`, "invalid_request", "input_reference"},
		{"bad model", []fv{{"model", "sora-2"}, {"prompt", "x"}}, `{"model":"sora-2","prompt":"x"}`, "invalid_model", "model"},
		{"seconds 3", with(fv{"seconds", "3"}), `{` + jsonBase + `,"seconds":"3"}`, "invalid_seconds", "seconds"},
		{"seconds 8.0", with(fv{"seconds", "8.0"}), `{` + jsonBase + `,"seconds":"8.0"}`, "invalid_seconds", "seconds"},
		{"seconds empty", with(fv{"seconds", ""}), `{` + jsonBase + `,"seconds":""}`, "invalid_seconds", "seconds"},
		{"seconds and duration differ", with(fv{"seconds", "6"}, fv{"duration", "7"}), `{` + jsonBase + `,"seconds":6,"duration":7}`, "seconds_duration_mismatch", "duration"},
		{"size of another model", with(fv{"size", "1920x1080"}), `{` + jsonBase + `,"size":"1920x1080"}`, "size_mismatch", "size"},
		{"boolean yes", with(fv{"watermark", "yes"}), `{` + jsonBase + `,"watermark":"yes"}`, "invalid_request", "watermark"},
		{"boolean True", with(fv{"watermark", "True"}), `{` + jsonBase + `,"watermark":"True"}`, "invalid_request", "watermark"},
		{"seed not a number", with(fv{"seed", "lucky"}), `{` + jsonBase + `,"seed":"lucky"}`, "invalid_seed", "seed"},
		{"seed too large", with(fv{"seed", "99999999999"}), `{` + jsonBase + `,"seed":99999999999}`, "invalid_seed", "seed"},
		{"prompt empty", []fv{{"model", "videogen-2.0-720p"}, {"prompt", " "}}, `{"model":"videogen-2.0-720p","prompt":" "}`, "invalid_prompt", "prompt"},
		{"prompt with NUL", []fv{{"model", "videogen-2.0-720p"}, {"prompt", "a\x00b"}}, `{"model":"videogen-2.0-720p","prompt":"a\u0000b"}`, "invalid_prompt", "prompt"},
		{"not our media URL", with(fv{"image_urls[]", "https://cdn.example.com/a.png"}), `{` + jsonBase + `,"image_urls":["https://cdn.example.com/a.png"]}`, "invalid_media_url", "image_urls[0]"},
		{"ten images", with(repeat(fv{"image_urls", img1}, 10)...), `{` + jsonBase + `,"image_urls":[` + strings.TrimSuffix(strings.Repeat(`"`+img1+`",`, 10), ",") + `]}`, "too_many_images", "image_urls"},
		// a form's own refusals
		{"a field twice", with(fv{"prompt", "another"}), "", "invalid_request", "prompt"},
		{"[] on a field that is no list", with(fv{"seconds[]", "8"}), "", "unknown_field", "seconds[]"},
		{"input_reference[image_url] twice", with(fv{"input_reference[image_url]", img1}, fv{"input_reference[image_url]", img2}), "", "invalid_request", "input_reference[image_url]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, aerr := videos.ParseCreateForm(tc.form, nil, policy)
			if tc.code != "" {
				if aerr == nil || aerr.Code != tc.code || aerr.Param != tc.param {
					t.Fatalf("form: got %v (param %q), want %s on %s", aerr, paramOf(aerr), tc.code, tc.param)
				}
			} else if aerr != nil {
				t.Fatalf("form refused: %v", aerr)
			}
			if tc.json == "" {
				return
			}
			want, jerr := videos.ParseCreate([]byte(tc.json), policy)
			if tc.code != "" {
				if jerr == nil || jerr.Code != aerr.Code || jerr.Param != aerr.Param {
					t.Fatalf("JSON twin: got %v (param %q), form got %v (param %q)", jerr, paramOf(jerr), aerr, aerr.Param)
				}
				return
			}
			if jerr != nil {
				t.Fatalf("JSON twin refused: %v", jerr)
			}
			if !reflect.DeepEqual(got, want) || got.Hash() != want.Hash() {
				t.Fatalf("form made %+v (hash %s), JSON %+v (hash %s)", *got, got.Hash(), *want, want.Hash())
			}
		})
	}
}

func repeat(v videos.FormValue, n int) []videos.FormValue {
	out := make([]videos.FormValue, n)
	for i := range out {
		out[i] = v
	}
	return out
}

func paramOf(e *refusal.Error) string {
	if e == nil {
		return ""
	}
	return e.Param
}
