package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"
	"videogen/internal/infra/db"
	"videogen/models"
)

// workerThroughput measures tasks per second from queued to completed and settled: n tasks are queued
// (by an instance without workers), then two instances with workers share the queue, each with its
// credentials on one standalone simulator that completes a task as soon as it is submitted and serves
// the same tiny video for every task (SIM_OUTPUT=tiny), so the figure is the task's lifecycle (claim,
// submit, poll, copy, settle) apart from the bytes. The rate is taken between 10% and 90% done, so
// start-up and the last stragglers do not count.
func (b *bench) workerThroughput(dbURL string, n int) {
	log.Printf("worker: queueing %d tasks", n)
	dataDir := filepath.Join(b.work, "data-worker")
	simAddr := freeAddr()
	sim := exec.Command(b.videogen, "upstream-sim", "--addr", simAddr, "--keys", "bench-sim-key")
	sim.Env = []string{"PATH=" + os.Getenv("PATH"), "SIM_DURATION=0", "SIM_OUTPUT=tiny", "SIM_CONCURRENCY=100000", "SIM_DATA_DIR=" + filepath.Join(b.work, "sim"), "LOG_LEVEL=warn"}
	sim.Stderr = os.Stderr
	if err := sim.Start(); err != nil {
		log.Fatal(err)
	}
	defer func() { _ = sim.Process.Kill(); _ = sim.Wait() }()
	// The pool as an operator describes it (docs/upstreams.md): one kind-sim credential on the standalone
	// simulator, with the simulator's concurrency.
	up := b.upstreamsEnv("worker", simCred{id: "bench-sim", url: "http://" + simAddr, models: []string{"videogen-2.0-mini-480p"}, max: 1000})
	url, _, stop := b.startServer(dbURL, dataDir, append(up, "WORKERS=false")...)
	keys := b.fund(dbURL)
	queueTasks(url, keys, "videogen-2.0-mini-480p", n, 8)
	stop()
	d, err := db.Open(context.Background(), dbURL)
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close()
	done := func() int {
		var c int64
		d.R.Model(&models.Task{}).Where("status = 'completed' AND billing_state = 'settled'").Count(&c)
		return int(c)
	}
	log.Printf("worker: two instances take the queue")
	var stops []func()
	var pprofAddr string
	instances := []int{}
	for i := 0; i < 2; i++ {
		_, addr, pid, stop := b.startServerPID(dbURL, dataDir, append(up, fmt.Sprintf("WORKER_ID=bench-%d", i))...)
		stops = append(stops, stop)
		pprofAddr = addr
		instances = append(instances, pid)
	}
	// The CPU time each part spends per task: the worker instances, the simulator and the PostgreSQL
	// backends serving this database. On a machine shared with other work it says what the rate would
	// be if the run had the cores to itself.
	parts := func() map[string][]int {
		var backends []int
		d.R.Raw("SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()").Scan(&backends)
		return map[string][]int{"worker instances": instances, "simulator": {sim.Process.Pid}, "PostgreSQL": backends}
	}
	defer func() {
		for _, s := range stops {
			s()
		}
	}()
	var from, to time.Time
	var fromN, toN int
	var cpuFrom []float64
	var partsFrom map[int]float64
	var partsCPU map[string]float64 // CPU seconds of each part between 10% and 90%
	// Transactions committed in the database (pg_stat_database, which backends update about once a
	// second: over a window of several seconds a few percent off).
	commits := func() float64 {
		var n float64
		d.R.Raw("SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()").Scan(&n)
		return n
	}
	var commitsFrom, commitsTo float64
	var prof chan string
	deadline := time.Now().Add(10 * time.Minute)
	for time.Now().Before(deadline) {
		c := done()
		switch {
		case from.IsZero() && c >= n/10:
			from, fromN, cpuFrom, commitsFrom = time.Now(), c, readCPU(), commits()
			partsFrom = map[int]float64{}
			for _, pids := range parts() {
				for _, pid := range pids {
					partsFrom[pid] = procCPU(pid).Seconds()
				}
			}
			prof = make(chan string, 1)
			go func() { prof <- b.profile(pprofAddr, 8*time.Second) }()
		case !from.IsZero() && c >= n*9/10:
			to, toN, commitsTo = time.Now(), c, commits()
			b.workerCPU = cpuBetween(cpuFrom, readCPU())
			partsCPU = map[string]float64{}
			for name, pids := range parts() {
				for _, pid := range pids {
					partsCPU[name] += procCPU(pid).Seconds() - partsFrom[pid] // a backend started since counts whole
				}
			}
		}
		if !to.IsZero() {
			break
		}
		// Each count reads the whole tasks table: often enough to time the window to a few tasks, not
		// so often that the count is a load of its own.
		time.Sleep(50 * time.Millisecond)
	}
	if to.IsZero() {
		log.Fatalf("worker: %d of %d tasks done after 10 minutes", done(), n)
	}
	rate := float64(toN-fromN) / to.Sub(from).Seconds()
	d.R.Model(&models.Task{}).Where("output_bytes IS NOT NULL").Select("COALESCE(AVG(output_bytes), 0)").Scan(&b.workerBytes)
	log.Printf("worker: %.0f tasks/s, videos of %.1f MB, CPU %.0f%% user %.0f%% system %.0f%% idle", rate, b.workerBytes/1e6,
		100*b.workerCPU.User, 100*b.workerCPU.System, 100*b.workerCPU.Idle)
	if prof != nil {
		b.profiles = append(b.profiles, profile{Target: "videogen on PostgreSQL, one of two worker instances", Case: "queued → completed and settled", Top: <-prof})
	}
	b.worker = rate
	b.ratios = append(b.ratios, ratio{Measure: "worker, queued → completed and settled, PostgreSQL, two instances", Ours: rate, Limit: 500, Unit: "tasks/s", Target: 1,
		Note: "the limit is the target itself, 500 tasks/s"})
	tasksDone := float64(toN - fromN)
	var total float64
	var split []string
	for _, name := range []string{"worker instances", "PostgreSQL", "simulator"} {
		ms := 1000 * partsCPU[name] / tasksDone
		total += ms
		split = append(split, fmt.Sprintf("%s %.2f ms", name, ms))
	}
	txPerTask := (commitsTo - commitsFrom) / tasksDone
	log.Printf("worker: CPU per task %.2f ms (%s); %.2f database transactions per task", total, strings.Join(split, ", "), txPerTask)
	b.sections = append(b.sections, fmt.Sprintf("During the worker run the machine's CPU was %.0f%% user, %.0f%% system (kernel) and %.0f%% idle (`/proc/stat`); "+
		"each task's video was %.1f MB, %.0f MB/s of video at this rate. "+
		"Each task took %.2f ms of CPU (%s; `/proc/<pid>/stat`): with the machine's %d cores to itself the run could reach about %.0f tasks/s. "+
		"The database committed %.2f transactions per task (`pg_stat_database`, this run's own counting of completed tasks included).\n",
		100*b.workerCPU.User, 100*b.workerCPU.System, 100*b.workerCPU.Idle, b.workerBytes/1e6, rate*b.workerBytes/1e6,
		total, strings.Join(split, ", "), runtime.NumCPU(), float64(runtime.NumCPU())*1000/total, txPerTask))
}
