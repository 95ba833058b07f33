"""Run moto's server with DynamoDB requests serialized.

moto evaluates a conditional write's condition and applies its update without
a lock, so concurrent requests can both pass the same condition (the state
store's conformance suite saw 2 of 8 concurrent claims win). Real DynamoDB and
DynamoDB Local never allow that. This launcher is moto_server with one change:
requests whose X-Amz-Target is a DynamoDB operation run one at a time. Other
services (SQS long polls included) stay concurrent.

Usage: python3 serve.py HOST PORT
"""
import signal
import sys
import threading

from werkzeug.serving import run_simple
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app


class SerializeDynamoDB:
    def __init__(self, app):
        self.app = app
        self.lock = threading.Lock()

    def __call__(self, environ, start_response):
        if environ.get("HTTP_X_AMZ_TARGET", "").startswith("DynamoDB_"):
            with self.lock:
                return list(self.app(environ, start_response))
        return self.app(environ, start_response)


def main():
    host, port = sys.argv[1], int(sys.argv[2])
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    app = DomainDispatcherApplication(create_backend_app)
    run_simple(host, port, SerializeDynamoDB(app), threaded=True)


if __name__ == "__main__":
    main()
