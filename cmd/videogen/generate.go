package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"videogen/client"
)

// exitInterrupted is the status of a command stopped by Ctrl-C, as shells report 128+SIGINT.
const exitInterrupted = 130

type generateFlags struct {
	model, prompt, ratio, output, resume, firstFrame, idempotencyKey string
	seconds                                                          int
	images, videos, audios                                           []string
}

// generateCmd is the customer's side of the binary: one command from a prompt to an MP4 on disk, through
// the public API and the client package, exactly as any program of theirs would do it.
func generateCmd() *cobra.Command {
	var f generateFlags
	c := &cobra.Command{
		Use:   "generate",
		Short: "make a video through the API: upload local files, create, wait with progress, download the MP4",
		Long: `generate makes one video through the API, as a customer: it uploads the local files given, creates
the video (with an Idempotency-Key, so a retried request never pays twice), waits with a progress bar
(plain "status …" lines when stdout is not a terminal), downloads the MP4 and prints the file, its size
and the amount charged.

  --first-frame FILE  the image the video starts from (uploaded as input_reference → start_image_url)
  --image FILE        a reference image, repeatable (image_files → image_urls)
  --video, --audio    reference videos and audio, repeatable (video_files, audio_files)

Ctrl-C while waiting leaves the video generating (its price stays reserved, charged when it completes) and prints the command that resumes:
generate --resume video_… waits for it and downloads it.

When the create gets no clear answer (the connection drops, the server fails with a 5xx), the video may
have been made all the same: generate prints the Idempotency-Key it sent and how to find the video.
Running the same command again with --idempotency-key KEY is safe: within 24 hours the server answers
with the video that key made, if it made one, instead of charging again.

Environment:
  VIDEOGEN_API_KEY   an API key (required)
  VIDEOGEN_BASE_URL  the server (default http://localhost:8080)

Exit status: 0 saved; 1 refused, failed or unreachable (the message says which); 130 interrupted.`,
		Example: `  videogen generate --model videogen-2.0-720p --prompt "a paper boat on a rainy street" --seconds 5 -o boat.mp4
  videogen generate --model videogen-2.0-720p --prompt "the boat sails off" --first-frame first.png --image style.jpg
  videogen generate --resume video_Q2x… -o boat.mp4`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runGenerate(cmd, f) },
	}
	fl := c.Flags()
	fl.StringVar(&f.model, "model", "", "model id, such as videogen-2.0-720p (GET /v1/models lists them)")
	fl.StringVar(&f.prompt, "prompt", "", "what the video shows")
	fl.IntVar(&f.seconds, "seconds", 0, "length, 4–15 (default: the server's, 4)")
	fl.StringVar(&f.ratio, "ratio", "", "aspect ratio: 21:9, 16:9, 4:3, 1:1, 3:4 or 9:16 (default 16:9)")
	fl.StringVar(&f.firstFrame, "first-frame", "", "an image `FILE` the video starts from")
	// StringArray, not StringSlice: a comma is a valid character in a file name.
	fl.StringArrayVar(&f.images, "image", nil, "a reference image `FILE` (repeatable)")
	fl.StringArrayVar(&f.videos, "video", nil, "a reference video `FILE` (repeatable)")
	fl.StringArrayVar(&f.audios, "audio", nil, "an audio `FILE` (repeatable)")
	fl.StringVarP(&f.output, "output", "o", "", "where to save the MP4 (default <video id>.mp4)")
	fl.StringVar(&f.resume, "resume", "", "wait for and download an existing video instead of creating one")
	fl.StringVar(&f.idempotencyKey, "idempotency-key", "", "the create's Idempotency-Key (default: a new random one); repeat a `KEY` printed by a create that got no answer to get its video instead of paying again")
	return c
}

func runGenerate(cmd *cobra.Command, f generateFlags) error {
	if f.resume != "" {
		for _, name := range []string{"model", "prompt", "seconds", "ratio", "first-frame", "image", "video", "audio", "idempotency-key"} {
			if cmd.Flags().Changed(name) {
				return fmt.Errorf("--resume continues an existing video: --%s cannot change it", name)
			}
		}
	} else if f.model == "" || strings.TrimSpace(f.prompt) == "" {
		return errors.New("--model and --prompt are required (or --resume video_… to continue a video)")
	}
	// Found out now rather than after the video was paid for and made.
	if err := checkOutput(f.output); err != nil {
		return err
	}
	key := strings.TrimSpace(os.Getenv("VIDEOGEN_API_KEY"))
	if key == "" {
		return fmt.Errorf("VIDEOGEN_API_KEY is not set: create a key on the console's API keys page (or with `%s`) and export VIDEOGEN_API_KEY=vg_…", hint("keys", "create", "--email", "…"))
	}
	base := os.Getenv("VIDEOGEN_BASE_URL")
	if base == "" {
		base = "http://localhost:8080"
	}
	c := client.New(base, key, client.WithUserAgent("videogen-cli/generate"))
	out := cmd.OutOrStdout()

	// Ctrl-C cancels ctx instead of killing the process, so what was paid for is never lost: the video
	// id is printed with the way back to it.
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt)
	defer stop()

	var v *client.Video
	var err error
	if f.resume != "" {
		if v, err = c.Get(ctx, f.resume); err != nil {
			if ctx.Err() != nil {
				interrupted(stop, "interrupted; resume with: "+resumeCommand(f.resume, f.output))
			}
			return fmt.Errorf("resume %s: %w", f.resume, err)
		}
	} else {
		if v, err = createVideo(ctx, c, f); err != nil {
			var cf *createFailed
			if errors.As(err, &cf) {
				err = cf.explain(base, f)
			}
			if ctx.Err() != nil {
				if cf == nil {
					// Stopped while opening or uploading files: no create was sent.
					interrupted(stop, "interrupted before the video was created; nothing was charged")
				}
				interrupted(stop, "interrupted; "+err.Error())
			}
			return err
		}
		fmt.Fprintf(out, "created %s (%s, %s s, %s); reserved %s USD\n", v.ID, v.Model, v.Seconds, v.Size, v.Billing.Amount)
	}

	id := v.ID
	if !v.Done() {
		p := newProgress(out, isTerminal(out))
		var last *client.Video
		last, err = c.Wait(ctx, id, p.update)
		p.stop(err == nil)
		if ctx.Err() != nil {
			interrupted(stop, "the video keeps generating; resume with: "+resumeCommand(id, f.output))
		}
		if last != nil {
			v = last
		}
	}
	var failed *client.VideoFailedError
	switch {
	case errors.As(err, &failed), err == nil && v.Status == client.StatusFailed: // the latter: a resumed video that had failed
		code, msg := "unknown", "no reason given"
		if v.Error != nil {
			code, msg = v.Error.Code, v.Error.Message
		}
		return fmt.Errorf("%s failed: %s: %s (nothing was charged: its %s USD reservation was released)", id, code, msg, v.Billing.Amount)
	case err != nil:
		return fmt.Errorf("wait for %s (it keeps generating; resume with: %s): %w", id, resumeCommand(id, f.output), err)
	}

	path := f.output
	if path == "" {
		path = id + ".mp4"
	}
	n, err := download(ctx, c, id, path)
	if err != nil {
		if ctx.Err() != nil {
			interrupted(stop, "the video is ready; download it with: "+resumeCommand(id, f.output))
		}
		return fmt.Errorf("download %s to %s (try again with: %s): %w", id, path, resumeCommand(id, f.output), err)
	}
	charge := "charged " + v.Billing.Amount + " USD"
	if v.Billing.State != "settled" {
		charge = fmt.Sprintf("%s USD, %s", v.Billing.Amount, v.Billing.State)
	}
	fmt.Fprintf(out, "saved %s (%d bytes, %s); %s\n", path, n, humanBytes(n), charge)
	return nil
}

// createVideo uploads the local files, if any, and creates the video with their URLs.
func createVideo(ctx context.Context, c *client.Client, f generateFlags) (*client.Video, error) {
	var files []client.File
	var opened []*os.File
	defer func() {
		for _, fh := range opened {
			_ = fh.Close()
		}
	}()
	// Every file is opened before anything is sent, so a typo in a path costs no upload.
	for _, group := range []struct {
		flag, part string
		paths      []string
	}{
		{"first-frame", client.PartFirstFrame, nonEmpty(f.firstFrame)}, {"image", client.PartImage, f.images},
		{"video", client.PartVideo, f.videos}, {"audio", client.PartAudio, f.audios},
	} {
		for _, p := range group.paths {
			fh, err := os.Open(p)
			if err != nil {
				return nil, fmt.Errorf("--%s: %w", group.flag, err)
			}
			opened = append(opened, fh)
			files = append(files, client.File{Part: group.part, Name: filepath.Base(p), Body: fh})
		}
	}
	// The key is chosen here, not by Create, so that it can be printed when the outcome is unknown.
	key := f.idempotencyKey
	if key == "" {
		key = client.NewIdempotencyKey()
	}
	p := client.CreateParams{Model: f.model, Prompt: f.prompt, Seconds: f.seconds, AspectRatio: f.ratio, IdempotencyKey: key}
	if len(files) > 0 {
		up, err := c.Upload(ctx, files...)
		if err != nil {
			return nil, fmt.Errorf("upload %d file(s): %w", len(files), err)
		}
		p.StartImageURL, p.ImageURLs, p.VideoURLs, p.AudioURLs = up.StartImageURL, up.ImageURLs, up.VideoURLs, up.AudioURLs
	}
	// The create is not cut short by Ctrl-C: once sent it may have reserved the price, and only its
	// answer tells which video to resume. It is quick, and bounded on its own.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	v, err := c.Create(cctx, p)
	if err != nil {
		return nil, &createFailed{err: fmt.Errorf("create: %w", err), key: key, uploaded: len(files) > 0}
	}
	return v, nil
}

// createFailed is a create that returned no video. Whether one was made anyway depends on how it failed.
type createFailed struct {
	err      error
	key      string // the Idempotency-Key every attempt carried
	uploaded bool   // local files were uploaded for it
}

func (e *createFailed) Error() string { return e.err.Error() }
func (e *createFailed) Unwrap() error { return e.err }

// explain returns the error with what became of the money. "Nothing was charged" only when the server
// refused every attempt (a 4xx) or none connected. Otherwise an attempt may have been accepted, its
// answer lost or turned into a 5xx on the way back, and the video may exist with its price reserved: the
// customer gets the key and the ways to find out instead of a reassurance that may be false.
func (e *createFailed) explain(base string, f generateFlags) error {
	if !client.MayHaveRun(e.err) {
		return fmt.Errorf("%w (nothing was charged: no video was created)", e.err)
	}
	lines := []string{
		e.err.Error(),
		"The video may have been created, and its price reserved, although no answer said so.",
		"The create was sent with Idempotency-Key: " + e.key,
		"Look for it among your latest videos (GET /v1/videos):",
		`  curl -s -H "Authorization: Bearer $VIDEOGEN_API_KEY" ` + shellQuote(strings.TrimSuffix(strings.TrimRight(base, "/"), "/v1")+"/v1/videos?limit=5"),
		"and continue it with: " + resumeCommand("video_…", f.output),
	}
	if !e.uploaded {
		// With local files a repeat would upload them again under new URLs: a different request, which
		// the server refuses for this key. Only the list helps then.
		lines = append(lines, "or run the same command again with --idempotency-key "+e.key+
			": within 24 hours the server answers with the video this key made, if it made one, instead of charging again.")
	}
	return &explained{msg: strings.Join(lines, "\n"), err: e.err}
}

// explained is an error with a message of its own that still unwraps to its cause.
type explained struct {
	msg string
	err error
}

func (e *explained) Error() string { return e.msg }
func (e *explained) Unwrap() error { return e.err }

// checkOutput refuses, before anything is paid for, an output the finished download could not be moved
// to: an existing folder, a folder that does not exist, or one this user cannot write in (the download
// makes its temporary file there). An empty path is <video id>.mp4 in the current folder.
func checkOutput(path string) error {
	flag, dir := "-o "+path, filepath.Dir(path)
	if path == "" {
		flag, dir = "the current folder", "."
	} else if st, err := os.Stat(path); err == nil && st.IsDir() {
		return fmt.Errorf("-o %s is a folder: give the file to save the video as, such as %s", path, filepath.Join(path, "video.mp4"))
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return fmt.Errorf("%s: the folder %s does not exist", flag, dir)
	}
	// Permission bits do not tell (ACLs, read-only mounts, root): trying is the only sure check.
	tmp, err := os.CreateTemp(dir, ".videogen-check-*")
	if err != nil {
		return fmt.Errorf("%s: cannot write in the folder %s: %w", flag, dir, err)
	}
	_ = tmp.Close()
	if err := os.Remove(tmp.Name()); err != nil {
		return fmt.Errorf("%s: remove the test file: %w", flag, err)
	}
	return nil
}

// download streams the MP4 into a temporary file beside path and renames it into place, so path is
// never a partial video, and returns its size.
func download(ctx context.Context, c *client.Client, id, path string) (int64, error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.part")
	if err != nil {
		return 0, err
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	n, err := c.Download(ctx, id, tmp)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		// CreateTemp makes files only the owner can read; a saved video is an ordinary file.
		err = os.Chmod(tmp.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	return n, err
}

// interrupted ends the command after Ctrl-C with a line on what became of the video.
func interrupted(stop context.CancelFunc, msg string) {
	stop()
	fmt.Fprintln(os.Stderr, msg)
	os.Exit(exitInterrupted)
}

func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}

func resumeCommand(id, output string) string {
	s := hint("generate", "--resume", id)
	if output != "" {
		s += " -o " + shellQuote(output)
	}
	return s
}

// shellQuote quotes s for a POSIX shell when it needs it, so the printed command can be pasted.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./+:@") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func humanBytes(n int64) string {
	const unit = 1000
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %cB", float64(n)/float64(div), "kMGTPE"[exp])
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// progress shows a video's status while Wait polls: a bar redrawn every second on a terminal, or a line
// per change of status or progress otherwise (a log or a pipe gets no control characters).
type progress struct {
	w     io.Writer
	start time.Time
	bar   *progressbar.ProgressBar // nil when w is not a terminal

	mu       sync.Mutex
	status   string
	percent  int
	lastLine string
	done     chan struct{}
	ticking  sync.WaitGroup
}

func newProgress(w io.Writer, terminal bool) *progress {
	p := &progress{w: w, start: time.Now(), done: make(chan struct{})}
	if terminal {
		p.bar = progressbar.NewOptions(100, progressbar.OptionSetWriter(w), progressbar.OptionSetWidth(30),
			progressbar.OptionSetPredictTime(false), progressbar.OptionSetElapsedTime(false),
			progressbar.OptionSetDescription(p.describe()))
		// Polls may be 15 s apart late in a long task: the elapsed time moves between them.
		p.ticking.Add(1)
		go func() {
			defer p.ticking.Done()
			t := time.NewTicker(time.Second)
			defer t.Stop()
			for {
				select {
				case <-p.done:
					return
				case <-t.C:
					p.bar.Describe(p.describe())
				}
			}
		}()
	}
	return p
}

func (p *progress) describe() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	status := p.status
	if status == "" {
		status = "waiting"
	}
	return fmt.Sprintf("%-11s %6s", status, p.elapsed())
}

func (p *progress) elapsed() string { return time.Since(p.start).Round(time.Second).String() }

// update is Wait's onUpdate.
func (p *progress) update(v *client.Video) {
	p.mu.Lock()
	p.status, p.percent = v.Status, v.Progress
	line := fmt.Sprintf("status %s %d%%", v.Status, v.Progress)
	changed := line != p.lastLine
	p.lastLine = line
	elapsed := p.elapsed()
	p.mu.Unlock()
	if p.bar != nil {
		p.bar.Describe(p.describe())
		_ = p.bar.Set(v.Progress)
		return
	}
	if changed {
		fmt.Fprintf(p.w, "%s %s\n", line, elapsed)
	}
}

// stop ends the display; completed fills the bar.
func (p *progress) stop(completed bool) {
	close(p.done)
	p.ticking.Wait()
	if p.bar == nil {
		return
	}
	if completed {
		_ = p.bar.Finish()
	} else {
		_ = p.bar.Exit()
	}
	fmt.Fprintln(p.w)
}
