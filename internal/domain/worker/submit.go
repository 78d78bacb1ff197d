package worker

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"videogen/internal/domain/tasks"
	"videogen/internal/domain/upstream"
	"videogen/internal/infra/storetext"
	"videogen/models"
)

// resubmit repeats a submission that had no clear answer, with the same credential and key, after
// recording the attempt.
func (w *Worker) resubmit(ctx context.Context, t *models.Task, cred upstream.Credential) {
	if err := w.Tasks.RecordAttempt(ctx, t, w.cfg.ID); err != nil {
		w.Log.Error("record submission attempt", "task", t.ID, "err", err)
		w.unclaim(ctx, t, w.Tasks.Now().Add(w.cfg.PollMin))
		return
	}
	w.submit(ctx, t, cred)
}

func (w *Worker) submit(ctx context.Context, t *models.Task, cred upstream.Credential) {
	log := w.Log.With("task", t.ID, "credential", cred.ID)
	req, err := w.submitRequest(ctx, t)
	if errors.Is(err, errInputsUnreadable) {
		w.fail(ctx, t, "internal_error", "The task's stored inputs could not be read. Your reservation was released.")
		return
	}
	if err != nil {
		// The database hiccupped; the claim comes round again at the task's next check.
		log.Error("prepare submission", "err", err)
		return
	}
	// The size the route renders for the one sold (the operator's size_map), and how long the provider
	// may run it: after RUN_TIMEOUT we give up on it, so paying for more would pay for nothing.
	caps := cred.Models[t.Model].Caps
	echo := func() {}
	req.UpstreamSize = caps.SendSize(req.Size)
	req.Expires = w.cfg.RunTimeout
	// What the video object echoes is what is sent: a seed only where the provider takes one, and the
	// sound a model renders whatever is asked.
	if dropSeed, soundAlways := req.Seed != nil && !caps.Seed, caps.AudioAlways && !req.GenerateAudio; dropSeed || soundAlways {
		var why []string
		if dropSeed {
			why = append(why, fmt.Sprintf("seed not sent: %s takes no seed, so the video's seed is null", cred.Models[t.Model].UpstreamModel))
			req.Seed = nil
		}
		if soundAlways {
			why = append(why, fmt.Sprintf("generate_audio echoed true: %s renders sound whatever is asked", cred.Models[t.Model].UpstreamModel))
			req.GenerateAudio = true
		}
		echo = func() {
			// Recorded once the provider took it: a task refused here keeps the customer's request for
			// the next route.
			if err := w.Tasks.EchoWhatIsSent(ctx, t, dropSeed, soundAlways, strings.Join(why, "; ")); err != nil {
				log.Error("record what is sent", "err", err)
			}
		}
	}
	st, err := w.Pool.Submit(ctx, cred, req)
	switch {
	case err == nil:
		echo()
		if st.Conformed != "" {
			w.note(ctx, t, st.Conformed)
		}
		// The claim is kept only when the answer already says more (in progress, done, failed): apply acts
		// on it now, under this claim.
		keep := st.State != upstream.StateQueued
		if err := w.Tasks.MarkSubmitted(ctx, t, st.ID, w.Tasks.Now().Add(w.cfg.PollMin), keep); err != nil {
			log.Error("record upstream id", "err", err)
			return
		}
		if keep {
			w.apply(ctx, t, cred, st)
		}
	case errors.Is(err, upstream.ErrRejected):
		log.Info("upstream rejected task", "err", err)
		w.note(ctx, t, "refused upstream: "+err.Error())
		var re *upstream.RejectedError
		if errors.As(err, &re) && re.Policy {
			w.fail(ctx, t, "content_policy_violation", msgPolicy)
			return
		}
		w.fail(ctx, t, "upstream_rejected", msgRejected)
	case errors.Is(err, upstream.ErrRoute) && (!w.routeLeft(t) || t.SubmitAttempts != 1 || t.Status != tasks.Queued):
		// The provider closed the route (a model not activated, a console limit reached, a quota used up):
		// nothing was created, and no other route of the model can take the task — or an earlier attempt
		// may have created it, so it cannot move without paying twice — so it fails now with its money
		// released, never retried on the closed route until RUN_TIMEOUT.
		log.Warn("route closed by the provider and no other route renders the task", "err", err)
		w.note(ctx, t, "refused upstream: "+clip(err.Error(), 300))
		w.fail(ctx, t, "model_unavailable", msgUnavailable)
	case t.SubmitAttempts == 1 && (errors.Is(err, upstream.ErrRoute) || errors.Is(err, upstream.ErrAuth) || errors.Is(err, upstream.ErrNotSent)):
		// The only submission certainly created nothing upstream: the task is free to go to a healthy
		// credential rather than wait for this one to be fixed.
		log.Warn("submission refused before anything was created; back to the queue", "err", err)
		if _, err := w.Tasks.ReturnToQueue(ctx, t, w.cfg.ID, w.Tasks.Now().Add(w.cfg.PollMin), clip(err.Error(), 300)); err != nil {
			log.Error("return to the queue", "err", err)
		}
	default:
		// Timeout, 5xx or a busy credential: the outcome is unknown or deferred. Retry later on the same
		// credential with the same key, so the upstream finds the first submission if it took it — and no
		// sooner than the provider's Retry-After.
		log.Warn("submit upstream", "attempt", t.SubmitAttempts, "err", err)
		next := w.Tasks.Now().Add(max(backoff(w.cfg.PollMin, w.cfg.PollMax, t.SubmitAttempts, 2), upstream.RetryAfter(err)))
		if err := w.Tasks.DeferSubmission(ctx, t, w.cfg.ID, next, clip(err.Error(), 200)); err != nil {
			log.Error("defer submission", "err", err)
		}
	}
}

var errInputsUnreadable = errors.New("stored inputs unreadable")

// submitRequest is the task as sent upstream, its media signed now when the media service can.
func (w *Worker) submitRequest(ctx context.Context, t *models.Task) (upstream.SubmitRequest, error) {
	req, err := t.Request()
	if err != nil {
		return upstream.SubmitRequest{}, fmt.Errorf("%w: %w", errInputsUnreadable, err)
	}
	if w.Inputs != nil && req.Count() > 0 {
		signed, err := w.Inputs(ctx, t.ID)
		if err != nil {
			return upstream.SubmitRequest{}, fmt.Errorf("sign the task's media: %w", err)
		}
		// A task created before media were linked to tasks keeps the URLs it was created with.
		if signed.Count() > 0 {
			req.TaskInputs = signed
		}
	}
	sr := upstream.SubmitRequest{VideoRequest: req, IdempotencyKey: *t.UpstreamKey}
	if t.UpstreamModel != nil {
		sr.UpstreamModel = *t.UpstreamModel
	}
	return sr, nil
}

// What a customer is told when the provider refuses or fails a task: our words, never the provider's
// (they may name the provider, its models or its internals); staff read the provider's own in the task
// log.
const (
	msgPolicy       = "The request was refused because its prompt or media may break the content policy. Your reservation was released. Change the prompt or media and create the task again."
	msgRejected     = "The generation service could not accept this request's parameters or media. Your reservation was released. Check the inputs (for example that every media URL is still valid) and create the task again."
	msgFailed       = "The generation failed. Your reservation was released. You can create the task again."
	msgFailedPolicy = "The generated video was withheld because it may break the content policy. Your reservation was released. Change the prompt or media and create the task again."
	msgUnavailable  = "No provider of this model can take the task now. Your reservation was released. GET /v1/models lists what can be created now; try again later or with another model."
)

// clip shortens s to at most n bytes on a character boundary, valid UTF-8 (it may end up in PostgreSQL).
func clip(s string, n int) string {
	s, cut := storetext.Clip(s, n)
	if cut {
		s += "…"
	}
	return s
}

// routeLeft reports whether some other usable route of the task's model still renders it: where none
// does, the task cannot start until an operator acts.
func (w *Worker) routeLeft(t *models.Task) bool {
	req, err := t.Request()
	if err != nil {
		return true // unreadable inputs: the queue's own handling fails it with internal_error
	}
	err = w.Pool.Admit(req)
	var unsupported *upstream.UnsupportedError
	return !errors.Is(err, upstream.ErrNotServed) && !errors.As(err, &unsupported)
}
