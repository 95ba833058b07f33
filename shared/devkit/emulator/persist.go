package emulator

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
)

// DynamoDBLocalFile is the file DynamoDB Local keeps its tables in under
// -dbPath with -sharedDb.
const DynamoDBLocalFile = "shared-local-instance.db"

// StartDynamoDBLocalPersistent starts DynamoDB Local as StartDynamoDBLocal
// does, on 127.0.0.1:port (0: a free port), but keeping its tables in dbDir
// (-dbPath, created if needed) instead of in memory: a later start on the
// same folder finds them again. Two processes must not share one folder.
func StartDynamoDBLocalPersistent(ctx context.Context, cacheDir, logDir, dbDir string, port int) (*Process, error) {
	abs, err := filepath.Abs(dbDir)
	if err != nil {
		return nil, fmt.Errorf("DynamoDB Local data folder %s: %w", dbDir, err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, fmt.Errorf("DynamoDB Local data folder: %w", err)
	}
	return startDynamoDBLocal(ctx, cacheDir, logDir, port, "-dbPath", abs)
}

// portFor returns port if it is free on 127.0.0.1 now, or a free port for 0.
// Another server on a port asked for is an error: an emulator started there
// would fail to bind, and the readiness check would find the other server.
func portFor(port int) (int, error) {
	if port == 0 {
		return FreePort()
	}
	if port < 0 || port > 65535 {
		return 0, fmt.Errorf("port %d is not a TCP port", port)
	}
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return 0, fmt.Errorf("127.0.0.1:%d is taken (by another emulator, or another sasctl dev?): %w", port, err)
	}
	return port, l.Close()
}
