package emulator

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"
)

// ErrMotoMissing says moto's server is not installed, and what to do.
var ErrMotoMissing = errors.New("moto_server not found: install it with " +
	"`pip install 'moto[server]'`, or set AWS_ENDPOINT_URL to a running emulator " +
	"such as LocalStack (http://localhost:4566)")

//go:embed motoserve/serve.py
var motoLauncher []byte

// StartMoto starts moto's server on 127.0.0.1 and a free port, through a
// launcher that makes its DynamoDB conditional writes atomic (see
// motoserve/serve.py); its log goes to logDir/moto.log.
func StartMoto(ctx context.Context, logDir string) (*Process, error) {
	return StartMotoOn(ctx, logDir, 0)
}

// StartMotoOn starts moto's server as StartMoto does, on 127.0.0.1:port (0:
// a free port); a port already taken is an error, never another server.
func StartMotoOn(ctx context.Context, logDir string, port int) (*Process, error) {
	if _, err := exec.LookPath("moto_server"); err != nil {
		return nil, ErrMotoMissing
	}
	python, err := exec.LookPath("python3")
	if err != nil {
		return nil, ErrMotoMissing
	}
	if err := exec.CommandContext(ctx, python, "-c", "import moto.moto_server.werkzeug_app").Run(); err != nil {
		return nil, fmt.Errorf("%w (python3 cannot import moto: %v)", ErrMotoMissing, err)
	}
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, err
	}
	launcher := filepath.Join(logDir, "moto_serve.py")
	if err := os.WriteFile(launcher, motoLauncher, 0o644); err != nil {
		return nil, fmt.Errorf("write moto launcher: %w", err)
	}
	port, err = portFor(port)
	if err != nil {
		return nil, fmt.Errorf("moto_server: %w", err)
	}
	cmd := exec.Command(python, launcher, "127.0.0.1", strconv.Itoa(port))
	endpoint := fmt.Sprintf("http://127.0.0.1:%d", port)
	return start(ctx, "moto_server", cmd, endpoint, filepath.Join(logDir, "moto.log"), 30*time.Second)
}
