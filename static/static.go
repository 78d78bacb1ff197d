// Package static embeds the console's stylesheet, script and images into the binary.
package static

import "embed"

// FS holds the files served under /static/.
//
//go:embed *.css *.js *.svg
var FS embed.FS
