// Package mp4synth synthesizes a real, playable H.264 MP4 (moving shapes over a static background) in pure Go, without external binaries.
package mp4synth
