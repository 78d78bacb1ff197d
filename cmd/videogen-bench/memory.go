package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"videogen/internal/infra/db"
	"videogen/models"
)

// The memory engine holds the server to its memory bounds (docs/performance.md), on PostgreSQL: its
// resident set stays under 256 MiB with memTasks tasks in flight (queued, or running at the simulator,
// each polled as in production) while memDownloads clients download stored videos at once; and its heap
// stays under 64 MiB while it receives a 300 MiB upload. The resident set is the kernel's count for the
// server process (/proc/<pid>/status: VmHWM, the peak, and VmRSS, sampled); the heap is the Go runtime's
// (HeapAlloc, from the pprof endpoint's memory statistics, sampled while the upload runs).
const (
	memTasks     = 10_000
	memDownloads = 1_000
	memVideos    = 8 // stored videos the downloads spread over
	// memRunningModel is the model of the tasks in flight: its own credential, on a simulator that takes
	// an hour per task, so they stay in flight; the stored videos are bytesModel's, on one that finishes
	// at once.
	memRunningModel = "videogen-2.0-480p"
)

// procStatus reads a field of /proc/<pid>/status in KiB (VmRSS, VmHWM).
func procStatus(pid int, field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	var kb int64
	_, _ = fmt.Sscanf(strings.TrimSpace(between(string(b), field+":", "\n")), "%d", &kb)
	return kb
}

// rssWatch samples the resident set of pid every 100 ms until stopped, keeping the largest.
type rssWatch struct {
	peak atomic.Int64 // KiB
	stop chan struct{}
	done sync.WaitGroup
}

func watchRSS(pid int) *rssWatch {
	w := &rssWatch{stop: make(chan struct{})}
	w.done.Add(1)
	go func() {
		defer w.done.Done()
		for {
			if v := procStatus(pid, "VmRSS"); v > w.peak.Load() {
				w.peak.Store(v)
			}
			select {
			case <-w.stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return w
}

func (w *rssWatch) Stop() int64 {
	close(w.stop)
	w.done.Wait()
	return w.peak.Load()
}

func mib(kb int64) float64 { return float64(kb) / 1024 }

// measureMemory runs the memory engine on a fresh PostgreSQL database of server.
func (b *bench) measureMemory(server string) {
	doneURL, stopDone := b.startSim("sim-mem-done", "0")
	defer stopDone()
	runURL, stopRun := b.startSim("sim-mem-running", "1h")
	defer stopRun()
	dbURL, drop := createDatabase(server)
	defer drop()
	dataDir := filepath.Join(b.work, "data-memory")
	up := b.upstreamsEnv("memory",
		simCred{id: "bench-done", url: doneURL, models: []string{bytesModel}, max: 100},
		simCred{id: "bench-running", url: runURL, models: []string{memRunningModel}, max: memTasks})
	d, err := db.Open(context.Background(), dbURL)
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close()
	count := func(where string, args ...any) int {
		var c int64
		d.R.Model(&models.Task{}).Where(where, args...).Count(&c)
		return int(c)
	}

	// The videos to download are stored first, by an instance of their own, the first account's.
	log.Printf("memory: %d stored videos to download", memVideos)
	url, _, _, stop := b.startServerPID(dbURL, dataDir, up...)
	keys := b.fundN(dbURL, 10)
	key := keys[0]
	queueTasks(url, keys[:1], bytesModel, memVideos, 4)
	for deadline := time.Now().Add(2 * time.Minute); count("status = 'completed'") < memVideos; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			log.Fatalf("memory: %d of %d videos stored after 2 minutes", count("status = 'completed'"), memVideos)
		}
	}
	stop()
	var videos []models.Task
	d.R.Where("status = 'completed'").Find(&videos)
	var paths []string
	for _, v := range videos {
		paths = append(paths, "/v1/videos/"+v.ID+"/content")
	}
	pathsFile := filepath.Join(b.work, "memory-paths.txt")
	_ = os.WriteFile(pathsFile, []byte(strings.Join(paths, "\n")+"\n"), 0o600)
	size := float64(*videos[0].OutputBytes) / 1e6

	// The measured instance, with production's poll intervals: 10,000 tasks polled every 50 ms to 1 s
	// would be a poll storm no deployment sees.
	url, pprofAddr, pid, stop := b.startServerPID(dbURL, dataDir, append(up, "POLL_INTERVAL_MIN=1s", "POLL_INTERVAL_MAX=30s")...)
	defer stop()
	idle := procStatus(pid, "VmRSS")
	rss := watchRSS(pid)

	// The upload on the idle instance, as TestUploadStreamsToStorage has it.
	heap, heapIdle, err := b.uploadHeap(url, pprofAddr, key)
	if err != nil {
		log.Fatalf("memory: upload: %v", err)
	}
	log.Printf("memory: heap %.1f MiB before a 300 MiB upload, peak %.1f MiB during it", heapIdle, heap)
	b.ratios = append(b.ratios, ratio{Measure: "server heap during a 300 MiB upload", Ours: heap, Limit: 64, Unit: "MiB", LowerIsBetter: true, Target: 1,
		Note: "the peak of the server's heap objects (HeapAlloc, sampled every 20 ms from its pprof endpoint) while it receives three 100 MiB videos in one POST /uploads/v1/files, against the bound, 64 MiB"})

	log.Printf("memory: %d tasks in flight", memTasks)
	began := time.Now()
	queueTasks(url, keys, memRunningModel, memTasks, 16)
	created := time.Since(began)
	inFlight := count("model = ? AND status IN ('queued', 'in_progress')", memRunningModel)
	log.Printf("memory: %d created in %v, %d in flight, %d of them submitted; RSS %.0f MiB (peak %.0f MiB); %d downloads at once",
		memTasks, created.Round(time.Millisecond), inFlight, count("model = ? AND upstream_task_id IS NOT NULL", memRunningModel),
		mib(procStatus(pid, "VmRSS")), mib(procStatus(pid, "VmHWM")), memDownloads)
	// Long enough for the resident set to settle under the load; a memory bound, not a rate.
	const dur = 5 * time.Second
	dl := b.wrkGet(url, key, pathsFile, memDownloads, dur)
	submitted := count("model = ? AND status IN ('queued', 'in_progress') AND upstream_task_id IS NOT NULL", memRunningModel)
	peak := max(rss.Stop(), procStatus(pid, "VmHWM"))
	now := procStatus(pid, "VmRSS")
	log.Printf("memory: downloads %.0f/s (%.0f MB/s), %d errors; %d submitted; RSS now %.0f MiB, peak %.0f MiB", dl.RPS, dl.RPS*size, dl.Errors, submitted, mib(now), mib(peak))
	if dl.Errors > 0 {
		log.Fatalf("memory: %d downloads failed", dl.Errors)
	}
	b.profiles = append(b.profiles, profile{Target: "videogen on PostgreSQL", Case: fmt.Sprintf("live heap with %d tasks in flight, after %d downloads at once (inuse_space)", memTasks, memDownloads),
		Top: b.heapProfile(pprofAddr)})
	b.ratios = append(b.ratios, ratio{Measure: fmt.Sprintf("server RSS, %d tasks in flight and %d downloads at once", memTasks, memDownloads), Ours: mib(peak), Limit: 256, Unit: "MiB",
		LowerIsBetter: true, Target: 1, Note: "the server process's peak resident set (VmHWM in /proc/<pid>/status) against the bound, 256 MiB"})
	b.sections = append(b.sections, fmt.Sprintf("**Memory.** The server (PostgreSQL) started at %.0f MiB resident. A 300 MiB upload (three 100 MiB videos in one request) took its heap from %.1f MiB to a peak of %.1f MiB. "+
		"Then %d tasks were created through the API in %.1f s and kept in flight (%d of them submitted to a simulator that takes an hour per task, polled at production's intervals, the rest waiting in the queue), "+
		"and %d clients downloaded %d stored %.1f MB videos at once for %s (%.0f/s, %.0f MB/s): its resident set peaked at %.0f MiB and was %.0f MiB at the end.\n",
		mib(idle), heapIdle, heap, memTasks, created.Seconds(), submitted, memDownloads, len(paths), size, dur, dl.RPS, dl.RPS*size, mib(peak), mib(now)))
}

// heapAlloc reads the server's HeapAlloc (bytes of heap objects, live or not yet swept: what
// TestUploadStreamsToStorage samples as /memory/classes/heap/objects:bytes) from its pprof endpoint, in MiB.
func heapAlloc(client *http.Client, pprofAddr string) float64 {
	resp, err := client.Get("http://" + pprofAddr + "/debug/pprof/heap?debug=1")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	n, _ := strconv.ParseInt(strings.TrimSpace(between(string(body), "# HeapAlloc = ", "\n")), 10, 64)
	return float64(n) / (1 << 20)
}

// mp4Head is the start of an MP4 (an ftyp box): enough for an upload to be taken as a video.
var mp4Head = []byte("\x00\x00\x00\x18ftypisom\x00\x00\x02\x00isomiso2")

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// uploadHeap sends three 100 MiB videos in one streamed POST /uploads/v1/files and returns the server's
// peak HeapAlloc while it ran and its HeapAlloc before, in MiB.
func (b *bench) uploadHeap(url, pprofAddr, key string) (peak, before float64, err error) {
	client := &http.Client{}
	before = heapAlloc(client, pprofAddr)
	var top atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			if v := uint64(heapAlloc(client, pprofAddr) * (1 << 20)); v > top.Load() {
				top.Store(v)
			}
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	err = upload300(url, key)
	close(stop)
	wg.Wait()
	return float64(top.Load()) / (1 << 20), before, err
}

// upload300 sends three 100 MiB videos, generated as they are sent, in one POST /uploads/v1/files.
func upload300(url, key string) error {
	const size = 100 << 20
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		for _, name := range []string{"a.mp4", "b.mp4", "c.mp4"} {
			w, err := mw.CreateFormFile("video_files", name)
			if err == nil {
				_, err = io.Copy(w, io.MultiReader(bytes.NewReader(mp4Head), io.LimitReader(zeros{}, size-int64(len(mp4Head)))))
			}
			if err != nil {
				_ = pw.CloseWithError(err)
				return
			}
		}
		_ = pw.CloseWithError(mw.Close())
	}()
	req, _ := http.NewRequest("POST", url+"/uploads/v1/files", pr)
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return fmt.Errorf("HTTP %d %s", resp.StatusCode, body)
	}
	return nil
}

// heapProfile takes a profile of the server's live heap (after a collection) and returns its top
// allocation sites by bytes in use.
func (b *bench) heapProfile(addr string) string {
	return b.pprofTop("http://"+addr+"/debug/pprof/heap?gc=1", "-sample_index=inuse_space")
}
