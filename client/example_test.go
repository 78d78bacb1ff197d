package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"videogen/client"
)

// From a prompt to an MP4 on disk: create, wait at the server's pace, download.
func Example() {
	ctx := context.Background()
	c := client.New(os.Getenv("VIDEOGEN_BASE_URL"), os.Getenv("VIDEOGEN_API_KEY"))

	v, err := c.Create(ctx, client.CreateParams{Model: "videogen-2.0-720p", Prompt: "a paper boat on a rainy street", Seconds: 5})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("reserved", v.Billing.Amount, "USD for", v.ID)

	v, err = c.Wait(ctx, v.ID, func(v *client.Video) { fmt.Println(v.Status, v.Progress) })
	if err != nil {
		log.Fatal(err) // a *client.VideoFailedError when the generation failed: nothing was charged
	}

	f, err := os.Create("boat.mp4")
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	n, err := c.Download(ctx, v.ID, f)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("saved %d bytes; charged %s USD\n", n, v.Billing.Amount)
}

// Local files go up first; the answer's URLs go into the create request.
func ExampleClient_Upload() {
	ctx := context.Background()
	c := client.New("http://localhost:8080", os.Getenv("VIDEOGEN_API_KEY"))

	first, err := os.Open("first-frame.png")
	if err != nil {
		log.Fatal(err)
	}
	defer first.Close()
	style, err := os.Open("style.jpg")
	if err != nil {
		log.Fatal(err)
	}
	defer style.Close()

	up, err := c.Upload(ctx,
		client.File{Part: client.PartFirstFrame, Name: "first-frame.png", Body: first},
		client.File{Part: client.PartImage, Name: "style.jpg", Body: style},
	)
	if err != nil {
		log.Fatal(err)
	}
	v, err := c.Create(ctx, client.CreateParams{
		Model: "videogen-2.0-720p", Prompt: "the paper boat sails off down the street",
		StartImageURL: up.StartImageURL, ImageURLs: up.ImageURLs,
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(v.ID, v.Status)
}

// With a key of your own, a create can be repeated after a crash without paying twice: the server
// answers the repeat with the first task.
func ExampleClient_Create_idempotencyKey() {
	ctx := context.Background()
	c := client.New("http://localhost:8080", os.Getenv("VIDEOGEN_API_KEY"))

	key := client.NewIdempotencyKey() // store it with your job before sending
	v, err := c.Create(ctx, client.CreateParams{Model: "videogen-2.0-mini-480p", Prompt: "a lighthouse at dusk", IdempotencyKey: key})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(v.ID)
}

// Every video of the account, newest first, page after page.
func ExampleClient_ListAll() {
	ctx := context.Background()
	c := client.New("http://localhost:8080", os.Getenv("VIDEOGEN_API_KEY"))

	for v, err := range c.ListAll(ctx, client.ListParams{Limit: 100}) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(v.ID, v.Status, v.Billing.Amount, v.Billing.State)
	}
}

// Waiting has no deadline of its own: give it one. When it passes, the video keeps generating and
// can be waited for again.
func ExampleClient_Wait() {
	c := client.New("http://localhost:8080", os.Getenv("VIDEOGEN_API_KEY"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	v, err := c.Wait(ctx, "video_Q2x", nil)
	var failed *client.VideoFailedError
	switch {
	case errors.As(err, &failed):
		fmt.Println("failed:", failed.Video.Error.Code, failed.Video.Error.Message)
	case errors.Is(err, context.DeadlineExceeded):
		fmt.Println("still generating; try again later")
	case err != nil:
		log.Fatal(err)
	default:
		fmt.Println(v.Status)
	}
}

// Refusals carry a stable code to branch on and the request id to quote to support.
func ExampleErrorCode() {
	// What Create returns for a model that does not exist (as the server would answer it).
	err := fmt.Errorf("create: %w", &client.APIError{
		Status: 400, Code: "invalid_model", Param: "model", Type: "invalid_request_error",
		Message: `Unknown model "videogen-9000".`, RequestID: "req_7f3a",
	})

	switch client.ErrorCode(err) {
	case "invalid_model":
		fmt.Println("choose a model from GET /v1/models")
	case "insufficient_balance":
		fmt.Println("top up the wallet")
	}
	if e, ok := client.AsAPIError(err); ok {
		fmt.Println(e.Status, e.Param, e.RequestID)
	}
	fmt.Println(err)
	// Output:
	// choose a model from GET /v1/models
	// 400 model req_7f3a
	// create: videogen: 400 invalid_model (model): Unknown model "videogen-9000". [request req_7f3a]
}

func ExampleNewIdempotencyKey() {
	key := client.NewIdempotencyKey()
	fmt.Println(len(key), key[14] == '4') // a version 4 UUID
	// Output: 36 true
}

// A create that failed may still have made the video: its answer can be lost, or be a 5xx given after
// the work was done. MayHaveRun tells that apart from a refusal, and the same key makes a repeat safe.
func ExampleMayHaveRun() {
	ctx := context.Background()
	c := client.New("http://localhost:8080", os.Getenv("VIDEOGEN_API_KEY"))
	p := client.CreateParams{Model: "videogen-2.0-mini-480p", Prompt: "a lighthouse at dusk", IdempotencyKey: client.NewIdempotencyKey()}

	v, err := c.Create(ctx, p)
	switch {
	case err == nil:
		fmt.Println(v.ID)
	case client.MayHaveRun(err):
		// Later, with the same p (the same key and request): the server answers with the video the
		// first create made, if it made one, and reserves nothing more.
		fmt.Println("unknown outcome; repeat with Idempotency-Key", p.IdempotencyKey)
	default:
		fmt.Println("refused, nothing reserved:", client.ErrorCode(err))
	}
}
