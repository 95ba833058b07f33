// Package costbench measures what an order costs: it runs orders through the
// local stack with every AWS request counted (shared/accounting), prices the
// counts at us-east-1 list prices (CloudWatch Logs ingestion of what the
// handlers write included), and sets them beside Step Functions running the
// same flow.
package costbench

import "math"

// Prices are us-east-1 list prices in dollars, no free tier.
type Prices struct {
	SQSRequest         float64 // per request (each 64 KB of payload counts as one)
	LambdaRequest      float64 // per invocation
	LambdaGBSecond     float64 // arm64
	DynamoDBWriteUnit  float64 // on demand
	DynamoDBReadUnit   float64 // on demand
	SNSPublish         float64
	LogsIngestedByte   float64 // CloudWatch Logs, Standard class, per byte ingested
	SFNTransition      float64 // Step Functions Standard, per state transition
	SFNExpressRequest  float64 // Step Functions Express, per execution
	SFNExpressGBSecond float64 // Express duration, first tier; billed per 100 ms, 64 MB minimum
	S3Put              float64 // per PUT request, S3 Standard
	S3Get              float64 // per GET request
	S3GBMonth          float64 // storage, per GB-month, first tier
	// S3StorageMonths is how long a payload is kept: the payload bucket's
	// expiry at the defaults (90 days' retention, a 24 h deadline), 93 days.
	S3StorageMonths float64
	// KMSRequest is a KMS request (sealData: a data key made or opened).
	KMSRequest float64
	// S3BytesPerSecond is what one Lambda function moves to or from S3 on
	// one connection: the time a payload's transfer adds to the function
	// that makes it is priced at this rate.
	S3BytesPerSecond float64
}

// ListPrices are the prices the bench uses (../shared/ENVIRONMENT.md, and
// aws.amazon.com/sns/pricing and /step-functions/pricing for SNS and Express).
var ListPrices = Prices{
	SQSRequest:        0.40e-6,
	LambdaRequest:     0.20e-6,
	LambdaGBSecond:    0.0000133334,
	DynamoDBWriteUnit: 0.625e-6,
	DynamoDBReadUnit:  0.125e-6,
	SNSPublish:        0.50e-6,
	// $0.50 per GB ingested (GB as 10^9 bytes: the dearer reading), the
	// Standard class in us-east-1, and the first tier of the tiered price
	// Lambda's logs have had since May 2025 (larger volumes pay less).
	LogsIngestedByte:   0.50e-9,
	SFNTransition:      25e-6,
	SFNExpressRequest:  1e-6,
	SFNExpressGBSecond: 0.00001667,
	// aws.amazon.com/s3/pricing, S3 Standard, us-east-1.
	S3Put:           0.005e-3,
	S3Get:           0.0004e-3,
	S3GBMonth:       0.023,
	S3StorageMonths: 93 / 30.44,
	KMSRequest:      0.03e-4, // $0.03 per 10,000 requests (aws.amazon.com/kms/pricing)
	// About 85-90 MB/s a connection, as AWS's S3 performance guidelines
	// put it; the lower end, so that the estimate errs high.
	S3BytesPerSecond: 85e6,
}

// PerOrder is what one order used, on average.
type PerOrder struct {
	SQSRequests       float64 `json:"sqsRequests"`
	LambdaInvocations float64 `json:"lambdaInvocations"`
	LambdaGBSeconds   float64 `json:"lambdaGBSeconds"`
	ReadUnits         float64 `json:"dynamodbReadUnits"`
	WriteUnits        float64 `json:"dynamodbWriteUnits"` // as DynamoDB bills them
	// ReportedWriteUnits are the write units as DynamoDB Local reported
	// them (accounting.Usage.ReportedWriteUnits); not priced.
	ReportedWriteUnits float64 `json:"dynamodbWriteUnitsReported"`
	// RefusedWriteUnits are the write units of writes refused by their
	// condition, in WriteUnits: no engine reports them.
	RefusedWriteUnits float64 `json:"dynamodbWriteUnitsRefused"`
	SNSPublishes      float64 `json:"snsPublishes"`
	// LogBytes are the bytes written to CloudWatch Logs: the handlers' log
	// lines, their EMF documents and Lambda's lines per invocation.
	LogBytes float64 `json:"logBytes"`
	// The payload bucket's: requests, the bytes they moved (to and from),
	// and the bytes kept there at the end (stored until the expiry).
	S3Puts      float64 `json:"s3Puts,omitempty"`
	S3Gets      float64 `json:"s3Gets,omitempty"`
	S3Bytes     float64 `json:"s3BytesMoved,omitempty"`
	S3KeptBytes float64 `json:"s3BytesKept,omitempty"`
	// KMSRequests are the data keys made and opened (sealData).
	KMSRequests float64 `json:"kmsRequests,omitempty"`
}

// Cost is the dollars per million orders, by service.
type Cost struct {
	SQS      float64 `json:"sqs"`
	Lambda   float64 `json:"lambda"`
	DynamoDB float64 `json:"dynamodb"`
	SNS      float64 `json:"sns"`
	Logs     float64 `json:"logs"`          // CloudWatch Logs ingestion
	S3       float64 `json:"s3,omitempty"`  // the payload bucket: requests and storage until the expiry
	KMS      float64 `json:"kms,omitempty"` // sealData's data keys
	SFN      float64 `json:"stepFunctions,omitempty"`
	Total    float64 `json:"total"`
}

// PerMillion prices u for a million orders.
func (p Prices) PerMillion(u PerOrder) Cost {
	c := Cost{
		SQS:      1e6 * u.SQSRequests * p.SQSRequest,
		Lambda:   1e6 * (u.LambdaInvocations*p.LambdaRequest + u.LambdaGBSeconds*p.LambdaGBSecond),
		DynamoDB: 1e6 * (u.WriteUnits*p.DynamoDBWriteUnit + u.ReadUnits*p.DynamoDBReadUnit),
		SNS:      1e6 * u.SNSPublishes * p.SNSPublish,
		Logs:     1e6 * u.LogBytes * p.LogsIngestedByte,
		S3:       1e6 * (u.S3Puts*p.S3Put + u.S3Gets*p.S3Get + u.S3KeptBytes/1e9*p.S3GBMonth*p.S3StorageMonths),
		KMS:      1e6 * u.KMSRequests * p.KMSRequest,
	}
	c.Total = c.SQS + c.Lambda + c.DynamoDB + c.SNS + c.Logs + c.S3 + c.KMS
	return c
}

// StepFunctions prices the same flow on Step Functions, generously to it: a
// state machine "store the order (DynamoDB PutItem) → one Task per step
// (invoking the same agent Lambda, one message each) → Succeed". Counted:
// its transitions (Standard) or execution and duration (Express), the agents'
// Lambda invocations and time as measured here, and the order's one write
// unit. Not counted: how orders reach it (a queue and a starter), and
// the status notifications; both would add to its bill.
type StepFunctions struct {
	Transitions int     `json:"transitions"` // per order: 1 + steps + 1
	Standard    Cost    `json:"standard"`
	Express     Cost    `json:"express"`
	ExpressMs   float64 `json:"expressBilledMs"` // per execution, rounded up to 100 ms
}

// SFN prices steps agent calls taking agentSeconds in all (per order) on Step
// Functions Standard and Express.
func (p Prices) SFN(steps int, agentSeconds float64) StepFunctions {
	agents := PerOrder{LambdaInvocations: float64(steps), WriteUnits: 1,
		LambdaGBSeconds: agentSeconds * AgentMemoryGB}
	base := p.PerMillion(agents)
	s := StepFunctions{Transitions: steps + 2, Standard: base, Express: base}
	s.Standard.SFN = 1e6 * float64(s.Transitions) * p.SFNTransition
	s.Standard.Total += s.Standard.SFN
	s.ExpressMs = math.Ceil(agentSeconds*10) * 100
	s.Express.SFN = 1e6 * (p.SFNExpressRequest + s.ExpressMs/1000*0.0625*p.SFNExpressGBSecond)
	s.Express.Total += s.Express.SFN
	return s
}
