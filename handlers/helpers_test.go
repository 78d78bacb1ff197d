package handlers_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"videogen/billing"
	"videogen/internal/money"
	"videogen/internal/testkit"
	"videogen/models"
)

func creditUSD(s *testkit.Server, accountID int64, usd string) error {
	amt, err := money.ParseUSD(usd)
	if err != nil {
		return err
	}
	_, err = billing.Credit{AccountID: accountID, Kind: models.KindTestTopup, Amount: amt, Reason: "test", Actor: "test"}.Apply(context.Background(), s.DB)
	return err
}

// postOversized sends POST /v1/videos over a raw connection with a JSON body far over 1 MiB — announced
// in Content-Length (the server refuses it from the header, having read at most its first 8 KiB), or
// chunked (sent until the server stops it).
func postOversized(t *testing.T, base, key string, chunked bool) *testkit.Resp {
	t.Helper()
	return postLarge(t, base, key, "application/json", "", 3<<20, chunked)
}

// postLarge sends POST /v1/videos with a body of n bytes (head, then filler) over a raw connection — its
// length announced, or chunked — and reads the answer while the body is still being written, so that a
// write failing after the server closed the connection cannot hide the answer.
func postLarge(t *testing.T, base, key, contentType, head string, n int, chunked bool) *testkit.Resp {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	req := "POST /v1/videos HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + key + "\r\nContent-Type: " + contentType + "\r\n"
	if chunked {
		req += "Transfer-Encoding: chunked\r\n\r\n"
	} else {
		req += fmt.Sprintf("Content-Length: %d\r\n\r\n", n)
	}
	if _, err := conn.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	go func() {
		chunk := func(b []byte) []byte {
			if chunked {
				return []byte(fmt.Sprintf("%x\r\n%s\r\n", len(b), b))
			}
			return b
		}
		if head != "" { // an empty chunk would end a chunked body
			if _, err := conn.Write(chunk([]byte(head))); err != nil {
				return
			}
		}
		filler := bytes.Repeat([]byte("a"), 64<<10)
		for sent := len(head); sent < n; sent += len(filler) {
			if _, err := conn.Write(chunk(filler)); err != nil {
				return // the server has answered and closed
			}
		}
		if chunked {
			_, _ = conn.Write([]byte("0\r\n\r\n"))
		}
	}()
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("read answer: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return &testkit.Resp{Status: resp.StatusCode, Header: resp.Header, Body: body}
}

// rawPost announces an n-byte body, sends its first 64 KiB and reads the answer over a raw connection,
// so a server that refuses early and closes cannot hide its answer behind a failed write.
func rawPost(t *testing.T, base, path, key, ctype string, n int) *testkit.Resp {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	auth := ""
	if key != "" {
		auth = "Authorization: Bearer " + key + "\r\n"
	}
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\n%sContent-Type: %s\r\nContent-Length: %d\r\n\r\n", path, auth, ctype, n)
	go func() { _, _ = conn.Write(make([]byte, 64<<10)) }()
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("read answer: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return &testkit.Resp{Status: resp.StatusCode, Header: resp.Header, Body: body}
}
