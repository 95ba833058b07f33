package main

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/sas-go/sas/shared/devkit/remotesim"
)

// devState is what a running `sasctl dev` writes to <run-dir>/dev.json (mode
// 0600): where its control endpoint is and its token, for `sasctl dev
// faults`, and what it started.
type devState struct {
	PID              int            `json:"pid"`
	Prefix           string         `json:"prefix"`
	Console          string         `json:"console"`
	Control          string         `json:"control"`
	Token            string         `json:"token"`
	Endpoint         string         `json:"endpoint"`
	DynamoDBEndpoint string         `json:"dynamodbEndpoint,omitempty"`
	QueuesEndpoint   string         `json:"queuesEndpoint,omitempty"` // SQS and SNS served in process (--queues in-process)
	Processes        map[string]int `json:"processes,omitempty"`      // started, by name: their PIDs
}

func devStatePath(runDir string) string { return filepath.Join(runDir, "dev.json") }

func readDevState(runDir string) (devState, error) {
	var s devState
	b, err := os.ReadFile(devStatePath(runDir))
	if errors.Is(err, os.ErrNotExist) {
		return s, fmt.Errorf("no sasctl dev runs from %s (no %s): start one with make dev", runDir, devStatePath(runDir))
	}
	if err == nil {
		err = json.Unmarshal(b, &s)
	}
	if err != nil {
		return s, fmt.Errorf("read %s: %w", devStatePath(runDir), err)
	}
	return s, nil
}

// alive reports whether a process with the PID exists.
func alive(pid int) bool { return pid > 0 && syscall.Kill(pid, 0) == nil }

// claimRunDir makes the run folder and refuses it if another sasctl dev
// runs from it (they would share DynamoDB Local's file).
func (d *devRun) claimRunDir() error {
	dir := d.flags.runDir
	for _, p := range []string{dir, d.flags.cacheDir} {
		if err := os.MkdirAll(p, 0o755); err != nil {
			return fmt.Errorf("create %s: %w", p, err)
		}
	}
	if s, err := readDevState(dir); err == nil && alive(s.PID) && s.PID != os.Getpid() {
		return fmt.Errorf("another sasctl dev runs from %s (pid %d, console %s): stop it, or use another --run-dir", dir, s.PID, s.Console)
	}
	return nil
}

// control serves the control endpoint on 127.0.0.1 and writes dev.json;
// stop removes it.
func (d *devRun) control() error {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return fmt.Errorf("control token: %w", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("control endpoint: %w", err)
	}
	d.state.PID, d.state.Prefix, d.state.Token = os.Getpid(), d.flags.Topology.Prefix, hex.EncodeToString(b)
	d.state.Control = "http://" + l.Addr().String()
	srv := &http.Server{Handler: controlHandler(d.sim, d.state.Token, l.Addr().String()), ReadHeaderTimeout: 5 * time.Second}
	d.background("the control endpoint", func(ctx context.Context) error {
		go func() { <-ctx.Done(); _ = srv.Close() }()
		if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
	path := devStatePath(d.flags.runDir)
	js, _ := json.MarshalIndent(d.state, "", "  ")
	if err := os.WriteFile(path, append(js, '\n'), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	d.later(func() { _ = os.Remove(path) })
	return nil
}

// controlHandler serves the simulator's faults to a caller with the token:
//
//	GET  /faults  the faults in effect, by service, in words
//	POST /faults  apply a remotesim.Change (JSON); answers as GET does
func controlHandler(sim *remotesim.Simulator, token, addr string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /faults", func(w http.ResponseWriter, _ *http.Request) { writeFaults(w, sim.AllFaults()) })
	mux.HandleFunc("POST /faults", func(w http.ResponseWriter, r *http.Request) {
		var c remotesim.Change
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&c); err != nil {
			http.Error(w, "bad change: "+err.Error(), http.StatusBadRequest)
			return
		}
		all, err := sim.Apply(c, time.Now())
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		writeFaults(w, all)
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := []byte(r.Header.Get("Authorization"))
		if r.Host != addr || subtle.ConstantTimeCompare(got, []byte("Bearer "+token)) != 1 {
			http.Error(w, "the control endpoint needs the token in dev.json", http.StatusForbidden)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// faultLine is one key's faults, in words.
type faultLine struct {
	Service string `json:"service"`
	Faults  string `json:"faults"`
}

func writeFaults(w http.ResponseWriter, all map[string]remotesim.Faults) {
	lines := []faultLine{}
	now := time.Now()
	for _, k := range slices.Sorted(maps.Keys(all)) {
		name := k
		if name == "" {
			name = "every service"
		}
		lines = append(lines, faultLine{Service: name, Faults: all[k].Describe(now)})
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(lines)
}
