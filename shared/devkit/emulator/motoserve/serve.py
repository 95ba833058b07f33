"""Run moto's server with two DynamoDB fixes.

1. Atomicity. moto evaluates a conditional write's condition and applies its
   update without a lock, so concurrent requests can both pass the same
   condition (the state store's conformance suite saw 2 of 8 concurrent claims
   win). Real DynamoDB and DynamoDB Local never allow that. Here requests whose
   X-Amz-Target is a DynamoDB operation run one at a time. Other services (SQS
   long polls included) stay concurrent.
2. Transaction cost. moto backs up every table a TransactWriteItems touches
   with a deep copy, so each transaction costs time in proportion to the whole
   table (107 ms per transaction at 400 items, growing). Here only the items the
   transaction names are saved, and restored if it is cancelled. This is safe
   because of (1): no other DynamoDB request runs meanwhile. If moto's internals
   differ from what this expects, the patch is skipped with a warning.
3. Idempotent transactions. DynamoDB remembers a TransactWriteItems
   ClientRequestToken for ten minutes and answers a retry with the same token
   with success, without applying it again; the AWS SDKs fill the token in and
   keep it across their retries. moto ignores it, so an SDK retry of a
   transaction whose first try was applied (a connection reset under load)
   came back as a failed condition. Here a token that succeeded is answered
   with success again.
4. Query cost. Every Query sorts the whole table before filtering it, then
   sorts its results again. Here a Query walks the items unsorted (its own
   sort of the results still orders them), so the supervisor's index query
   stays cheap as finished orders pile up.
5. Long update expressions. moto parses an update expression into a tree one
   level deeper per action and deep-copies it recursively, so an update of a
   hundred records (the completion that makes a forEach step's 100 items
   ready: 200 SET actions, 2.6 KB, well within DynamoDB's 4 KB) passed
   Python's default recursion limit and came back as HTTP 500. Here the limit
   is raised, with request threads' stacks large enough to hold it.
6. Item-sized answers. moto serializes every answer through botocore's
   output model, node by node: 0.9 s for an UpdateItem returning an item of
   400 records (the largest order). A DynamoDB answer carrying items is
   already its wire JSON: here it is written with json.dumps (the model's
   path is kept for anything json cannot write as is).
8. Item-sized walks. Every attribute an update sets re-measures the whole
   item, and moto's measure rebuilds each nested map's values as new objects
   to measure them; its answer deep-copies the item to turn it to JSON, and
   converts it once more for the serializer. Here a value is measured and
   turned to JSON as it is, and an answer carrying items is written from them
   in one pass (the same JSON, a third of the time at 400 records).
7. Copies an update does not need. Each UpdateItem deep-copies its item
   twice (for a stream the table may have, and for the old values an
   answer may return) and serializes one copy: 120 ms of an update's 150 ms
   at 400 records. Here an update of a table without a stream, answering
   ALL_NEW or nothing, copies nothing.

Usage: python3 serve.py HOST PORT
"""
import copy
import io
import json
import signal
import sys
import threading
import time

from werkzeug.serving import run_simple
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app


TOKEN_TTL = 600  # seconds DynamoDB remembers a ClientRequestToken


class SerializeDynamoDB:
    def __init__(self, app):
        self.app = app
        self.lock = threading.Lock()
        self.tokens = {}  # ClientRequestToken -> time it succeeded

    def __call__(self, environ, start_response):
        target = environ.get("HTTP_X_AMZ_TARGET", "")
        if not target.startswith("DynamoDB_"):
            return self.app(environ, start_response)
        with self.lock:
            if not target.endswith(".TransactWriteItems"):
                return list(self.app(environ, start_response))
            return self.transact(environ, start_response)

    def transact(self, environ, start_response):
        body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
        environ["wsgi.input"] = io.BytesIO(body)
        try:
            token = json.loads(body).get("ClientRequestToken")
        except ValueError:
            token = None
        now = time.time()
        self.tokens = {t: at for t, at in self.tokens.items() if now - at < TOKEN_TTL}
        if token and token in self.tokens:
            start_response("200 OK", [("Content-Type", "application/x-amz-json-1.0")])
            return [b"{}"]
        status = []

        def record(st, headers, exc_info=None):
            status.append(st)
            return start_response(st, headers, exc_info) if exc_info else start_response(st, headers)

        out = list(self.app(environ, record))
        if token and status and status[0].startswith("200"):
            self.tokens[token] = now
        return out


def patch_transactions():
    try:
        import moto.dynamodb.models as models
        from moto.dynamodb.models.table import Table
        backend = models.DynamoDBBackend
        original = backend.transact_write_items
        backend.get_keys_value  # the helper the patch relies on
    except (ImportError, AttributeError) as e:
        print(f"moto launcher: transaction patch skipped ({e})", file=sys.stderr)
        return

    class NoTableCopy:
        """Stands in for the copy module inside moto's DynamoDB models."""

        def __init__(self, real):
            self.real = real

        def deepcopy(self, x, memo=None):
            return x if isinstance(x, Table) else self.real.deepcopy(x, memo)

    def transact_write_items(self, transact_items):
        saved = []
        for entry in transact_items:
            _, op = next(iter(entry.items()))
            table = self.tables.get(op.get("TableName"))
            if table is None:
                continue
            try:
                keys = op.get("Key") or op["Item"]
                hash_key, range_key = self.get_keys_value(table, keys)
            except Exception:
                continue  # moto itself reports the malformed entry
            old = table.get_item(hash_key, range_key)
            saved.append((table, hash_key, range_key, copy.deepcopy(old)))
        prev = models.copy
        models.copy = NoTableCopy(prev)
        try:
            return original(self, transact_items)
        except Exception:
            for table, hash_key, range_key, old in reversed(saved):
                if range_key is not None:
                    table.items[hash_key].pop(range_key, None)
                    if old is not None:
                        table.items[hash_key][range_key] = old
                else:
                    table.items.pop(hash_key, None)
                    if old is not None:
                        table.items[hash_key] = old
            raise
        finally:
            models.copy = prev

    backend.transact_write_items = transact_write_items


def patch_query():
    try:
        from moto.dynamodb.models.table import Table
        original = Table.query
    except (ImportError, AttributeError) as e:
        print(f"moto launcher: query patch skipped ({e})", file=sys.stderr)
        return

    def unsorted_items(table):
        items = []
        for hash_set in table.items.values():
            if table.range_key_attr:
                items.extend(hash_set.values())
            else:
                items.append(hash_set)
        return items

    def query(self, *args, **kwargs):
        self.all_items = lambda: unsorted_items(self)  # shadows the sorting method
        try:
            return original(self, *args, **kwargs)
        finally:
            del self.all_items

    Table.query = query


def patch_results():
    try:
        import base64
        from moto.dynamodb.responses import DynamoResult
        from moto.dynamodb.models.dynamo_type import DynamoType
        from moto.dynamodb.models.utilities import dynamo_to_dict
        from moto.core.responses import ActionResult
        original = DynamoResult.execute_result
    except (ImportError, AttributeError) as e:
        print(f"moto launcher: answer patch skipped ({e})", file=sys.stderr)
        return
    carrying = {"Item", "Attributes", "Items", "Responses"}

    def wire(o):
        """A value json cannot write as is: a DynamoType, or binary."""
        if isinstance(o, DynamoType):
            return o.to_json()
        if isinstance(o, (bytes, bytearray)):
            return base64.b64encode(o).decode("ascii")
        raise TypeError(type(o).__name__)

    def init(self, result):
        self._raw, self._converted = result, None

    def result(self):
        if self._converted is None:
            self._converted = dynamo_to_dict(self._raw)
        return self._converted

    def execute_result(self, context):
        r = self._raw
        if isinstance(r, dict) and carrying & r.keys():
            try:
                body = json.dumps(r, separators=(",", ":"), default=wire)
            except (TypeError, ValueError):
                return original(self, context)
            return 200, {"Content-Type": "application/x-amz-json-1.0"}, body
        return original(self, context)

    DynamoResult.__init__ = init
    DynamoResult.result = property(result)
    DynamoResult.execute_result = execute_result
    assert ActionResult  # the base whose result the property stands in for


def patch_item_walks():
    try:
        from moto.dynamodb.models.dynamo_type import DynamoType
        from moto.dynamodb.models.utilities import bytesize
        import base64
        DynamoType.size, DynamoType.to_regular_json  # what the patch replaces
    except (ImportError, AttributeError) as e:
        print(f"moto launcher: item walk patch skipped ({e})", file=sys.stderr)
        return

    def size(self):
        v = self.value
        if self.is_number():
            return len(str(v))
        if self.is_set():
            return sum(DynamoType({self.type[0]: x}).size() for x in v)
        if self.is_list():
            return sum(x.size() if type(x) is DynamoType else DynamoType(x).size() for x in v)
        if self.is_map():
            return sum(bytesize(k) + (x.size() if type(x) is DynamoType else DynamoType(x).size()) for k, x in v.items())
        if isinstance(v, bool):
            return 1
        return bytesize(v)

    def to_regular_json(self):
        v = self.value
        if isinstance(v, dict):
            v = {k: (x.to_regular_json() if isinstance(x, DynamoType) else x) for k, x in v.items()}
        elif isinstance(v, list):
            v = [x.to_regular_json() if isinstance(x, DynamoType) else x for x in v]
        if self.is_binary() and isinstance(v, str):
            v = base64.b64decode(v)
        return {self.type: v}

    DynamoType.size = size
    DynamoType.to_regular_json = to_regular_json


class _NoItem:
    """What an update's unneeded copy of its item becomes: no attributes."""

    def __bool__(self):
        return True

    def to_json(self):
        return {"Attributes": {}}


def patch_update_copies():
    try:
        import moto.dynamodb.models as models
        import moto.dynamodb.responses as responses
        from moto.dynamodb.models.dynamo_type import Item
        handler, backend = responses.DynamoHandler, models.DynamoDBBackend
        original_handler, original_backend = handler.update_item, backend.update_item
        backend.get_table  # the helper the patch relies on
    except (ImportError, AttributeError) as e:
        print(f"moto launcher: update copy patch skipped ({e})", file=sys.stderr)
        return
    skip = {"handler": False, "backend": False}

    class ItemCopy:
        """Stands in for the copy module: an Item is not copied while skipped."""

        def __init__(self, real, where):
            self.real, self.where = real, where

        def deepcopy(self, x, memo=None):
            if skip[self.where] and isinstance(x, Item):
                return _NoItem()
            return self.real.deepcopy(x, memo)

        def __getattr__(self, name):
            return getattr(self.real, name)

    responses.copy = ItemCopy(responses.copy, "handler")
    models.copy = ItemCopy(models.copy, "backend")

    def handler_update_item(self):
        skip["handler"] = self.body.get("ReturnValues") in (None, "NONE", "ALL_NEW")
        try:
            return original_handler(self)
        finally:
            skip["handler"] = False

    def backend_update_item(self, table_name, *args, **kwargs):
        skip["backend"] = getattr(self.get_table(table_name), "stream_shard", True) is None
        try:
            return original_backend(self, table_name, *args, **kwargs)
        finally:
            skip["backend"] = False

    handler.update_item = handler_update_item
    backend.update_item = backend_update_item


def main():
    host, port = sys.argv[1], int(sys.argv[2])
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    threading.stack_size(256 << 20)  # the request threads', for the recursion below
    sys.setrecursionlimit(50_000)
    patch_transactions()
    patch_query()
    patch_results()
    patch_item_walks()
    patch_update_copies()
    app = DomainDispatcherApplication(create_backend_app)
    run_simple(host, port, SerializeDynamoDB(app), threaded=True)


if __name__ == "__main__":
    main()
