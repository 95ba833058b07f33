package sqsmem

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Error codes: the JSON protocol's __type (a shape of the SQS model, which
// the SDK turns into its typed error) and the query protocol's code (the
// x-amzn-query-error header, the SDK's ErrorCode()).
const (
	codeNoQueue               = "QueueDoesNotExist"
	codeQueueExists           = "QueueNameExists"
	codeInvalidAttributeName  = "InvalidAttributeName"
	codeInvalidAttributeValue = "InvalidAttributeValue"
	codeInvalidParameterValue = "InvalidParameterValue"
	codeReceiptInvalid        = "ReceiptHandleIsInvalid"
	codeEmptyBatch            = "EmptyBatchRequest"
	codeTooManyEntries        = "TooManyEntriesInBatchRequest"
	codeIdsNotDistinct        = "BatchEntryIdsNotDistinct"
	codeInvalidBatchID        = "InvalidBatchEntryId"
	codeBatchTooLong          = "BatchRequestTooLong"
	codeMissingParameter      = "MissingParameter"
	codeInvalidAction         = "InvalidAction"
	codeMessageNotInflight    = "MessageNotInflight"
)

// queryCodes are the codes SQS's query protocol gave the errors whose
// model shape has another name.
var queryCodes = map[string]string{
	codeNoQueue: "AWS.SimpleQueueService.NonExistentQueue", codeQueueExists: "QueueAlreadyExists",
	codeEmptyBatch: "AWS.SimpleQueueService.EmptyBatchRequest", codeTooManyEntries: "AWS.SimpleQueueService.TooManyEntriesInBatchRequest",
	codeIdsNotDistinct: "AWS.SimpleQueueService.BatchEntryIdsNotDistinct", codeInvalidBatchID: "AWS.SimpleQueueService.InvalidBatchEntryId",
	codeBatchTooLong: "AWS.SimpleQueueService.BatchRequestTooLong", codeMessageNotInflight: "AWS.SimpleQueueService.MessageNotInflight",
}

// apiError is an error answer.
type apiError struct {
	code, msg string
}

func (e *apiError) Error() string { return e.code + ": " + e.msg }

var errNoQueue = &apiError{code: codeNoQueue, msg: "The specified queue does not exist."}

func invalidParameter(format string, a ...any) *apiError {
	return &apiError{code: codeInvalidParameterValue, msg: fmt.Sprintf(format, a...)}
}

// operation decodes its input from the request body and returns the output.
type operation func(s *Server, r *http.Request, body []byte) (any, error)

// operations are the SQS operations served, by name.
var operations = map[string]operation{
	"CreateQueue": (*Server).createQueue, "GetQueueUrl": (*Server).getQueueURL, "DeleteQueue": (*Server).deleteQueue,
	"ListQueues": (*Server).listQueues, "GetQueueAttributes": (*Server).getQueueAttributes,
	"SetQueueAttributes": (*Server).setQueueAttributes, "PurgeQueue": (*Server).purgeQueue,
	"SendMessage": (*Server).sendMessage, "SendMessageBatch": (*Server).sendMessageBatch,
	"ReceiveMessage": (*Server).receiveMessage, "DeleteMessage": (*Server).deleteMessage,
	"DeleteMessageBatch": (*Server).deleteMessageBatch, "ChangeMessageVisibility": (*Server).changeVisibility,
	"ChangeMessageVisibilityBatch": (*Server).changeVisibilityBatch,
}

// serveSQS answers one JSON-protocol request.
func (s *Server) serveSQS(w http.ResponseWriter, r *http.Request, target string) {
	name, ok := strings.CutPrefix(target, "AmazonSQS.")
	op := operations[name]
	if !ok || op == nil {
		writeError(w, &apiError{code: codeInvalidAction, msg: fmt.Sprintf("The action %s is not valid for this endpoint.", target)})
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 8<<20))
	if err != nil {
		writeError(w, invalidParameter("read request: %v", err))
		return
	}
	out, err := op(s, r, body)
	if err != nil {
		writeError(w, err)
		return
	}
	b, err := json.Marshal(out)
	if err != nil {
		writeError(w, fmt.Errorf("encode %s output: %w", name, err))
		return
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	_, _ = w.Write(b)
}

// queueRef is the queue an operation's input names.
type queueRef struct{ QueueUrl string }

func (r queueRef) ref() string { return r.QueueUrl }

// onQueue decodes an operation's input and runs do on the queue it names,
// under s.mu.
func onQueue[T interface{ ref() string }](s *Server, body []byte, do func(*queue, T) (any, error)) (any, error) {
	var in T
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	q, err := s.lookup(in.ref())
	if err != nil {
		return nil, err
	}
	return do(q, in)
}

// decode reads a request's JSON input.
func decode(body []byte, in any) error {
	if len(body) == 0 {
		return nil
	}
	if err := json.Unmarshal(body, in); err != nil {
		return invalidParameter("The request body is not valid JSON: %v", err)
	}
	return nil
}

// writeError answers with an error in the JSON protocol's shape.
func writeError(w http.ResponseWriter, err error) {
	e, ok := err.(*apiError)
	status := http.StatusBadRequest
	if !ok {
		e, status = &apiError{code: "InternalError", msg: err.Error()}, http.StatusInternalServerError
	}
	qc := e.code
	if c, ok := queryCodes[e.code]; ok {
		qc = c
	}
	fault := "Sender"
	if status >= 500 {
		fault = "Receiver"
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.Header().Set("X-Amzn-Query-Error", qc+";"+fault)
	w.WriteHeader(status)
	b, _ := json.Marshal(map[string]string{"__type": "com.amazonaws.sqs#" + e.code, "message": e.msg})
	_, _ = w.Write(b)
}

// attrValue is a message attribute's value, as the JSON protocol carries it
// (BinaryValue base64 in JSON, decoded here).
type attrValue struct {
	DataType    string  `json:"DataType"`
	StringValue *string `json:"StringValue,omitempty"`
	BinaryValue []byte  `json:"BinaryValue,omitempty"`
}
