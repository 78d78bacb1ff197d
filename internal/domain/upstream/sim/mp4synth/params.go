package mp4synth

import (
	"errors"
	"fmt"
)

// ErrInvalidParams is wrapped by every error caused by out-of-range Params.
var ErrInvalidParams = errors.New("mp4synth: invalid params")

// Limits of Params; exported so callers can validate user input the same way.
const (
	MinDimension = 16
	MaxDimension = 4096
	MinSeconds   = 1
	MaxSeconds   = 60
	DefaultFPS   = 24
	MaxFPS       = 60
)

// Params describes the video to synthesize.
type Params struct {
	Width, Height int   // even, 16..4096; need NOT be multiples of 16
	Seconds       int   // 1..60
	FPS           int   // 0 means 24
	Seed          int64 // varies colours/motion so different tasks look different (optional use)
}

// normalize applies defaults and checks ranges, so the rest of the package
// can trust every field.
func (p Params) normalize() (Params, error) {
	if p.FPS == 0 {
		p.FPS = DefaultFPS
	}
	if err := checkDim("width", p.Width); err != nil {
		return p, err
	}
	if err := checkDim("height", p.Height); err != nil {
		return p, err
	}
	if p.Seconds < MinSeconds || p.Seconds > MaxSeconds {
		return p, fmt.Errorf("%w: seconds %d not in [%d, %d]", ErrInvalidParams, p.Seconds, MinSeconds, MaxSeconds)
	}
	if p.FPS < 1 || p.FPS > MaxFPS {
		return p, fmt.Errorf("%w: fps %d not in [1, %d] (0 means %d)", ErrInvalidParams, p.FPS, MaxFPS, DefaultFPS)
	}
	return p, nil
}

// checkDim enforces even sizes because 4:2:0 frame cropping works in units
// of two luma samples.
func checkDim(name string, v int) error {
	if v < MinDimension || v > MaxDimension || v%2 != 0 {
		return fmt.Errorf("%w: %s %d must be even and in [%d, %d]", ErrInvalidParams, name, v, MinDimension, MaxDimension)
	}
	return nil
}

// frames is the exact number of samples in the track.
func (p Params) frames() int { return p.Seconds * p.FPS }
