package stills

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
)

// FFmpeg makes the stills of a stored video with the ffmpeg program, for providers that serve only the
// video (Seedance on Ark). Path is the program; an FFmpeg with an empty Path makes nothing.
type FFmpeg struct {
	Path string
}

// Find returns an FFmpeg running the program named (a path, or a name looked up on PATH), and whether
// it was found. Operators without ffmpeg get videos without stills from such providers.
func Find(name string) (FFmpeg, bool) {
	if name == "" || name == "off" {
		return FFmpeg{}, false
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return FFmpeg{}, false
	}
	return FFmpeg{Path: p}, true
}

// Make writes the variant of the video file at videoPath (seconds long) to w as a JPEG: its first frame,
// or a SheetColumns x SheetRows spritesheet of frames at even intervals, as EncodeSpritesheet lays out.
func (f FFmpeg) Make(ctx context.Context, videoPath, variant string, seconds int, w io.Writer) error {
	if f.Path == "" {
		return fmt.Errorf("make %s: no ffmpeg", variant)
	}
	args := []string{"-nostdin", "-v", "error", "-i", videoPath}
	switch variant {
	case Thumbnail:
	case Spritesheet:
		rate := strconv.FormatFloat(float64(SheetColumns*SheetRows)/float64(max(seconds, 1)), 'f', 6, 64)
		args = append(args, "-vf", fmt.Sprintf("fps=%s,scale='min(%d,iw)':-2,tile=%dx%d", rate, TileWidth, SheetColumns, SheetRows))
	default:
		return fmt.Errorf("make %s: not a still variant", variant)
	}
	args = append(args, "-frames:v", "1", "-c:v", "mjpeg", "-q:v", "3", "-f", "image2pipe", "-")
	cmd := exec.CommandContext(ctx, f.Path, args...)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = w, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("make %s with ffmpeg: %w: %s", variant, err, strings.TrimSpace(stderr.String()))
	}
	return nil
}
