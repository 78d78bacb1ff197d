package customer

import (
	"strconv"
	"strings"
)

// secondsWords says which durations a model renders: "4 to 15" for a run, "4, 8 or 12" otherwise.
func secondsWords(secs []int) string {
	if len(secs) == 0 {
		return "none"
	}
	run := true
	for i := 1; i < len(secs); i++ {
		if secs[i] != secs[i-1]+1 {
			run = false
		}
	}
	if run && len(secs) > 2 {
		return strconv.Itoa(secs[0]) + " to " + strconv.Itoa(secs[len(secs)-1])
	}
	words := make([]string, len(secs))
	for i, s := range secs {
		words[i] = strconv.Itoa(s)
	}
	if len(words) == 1 {
		return words[0]
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}

// inputNames are the media inputs as a customer reads them, with the request field that carries each.
var inputNames = map[string]string{
	"first_frame":      "first frame",
	"last_frame":       "last frame",
	"reference_images": "reference images",
	"reference_videos": "reference videos",
	"reference_audio":  "reference audio",
}

// inputWords lists the inputs a model takes, or says it takes a prompt only.
func inputWords(inputs []string) string {
	if len(inputs) == 0 {
		return "prompt only"
	}
	words := make([]string, len(inputs))
	for i, in := range inputs {
		words[i] = inputNames[in]
	}
	return strings.Join(words, ", ")
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
