package deployment

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
)

// Network places the stack's functions in a VPC of the customer's, by ids
// (the stack looks nothing up, so synth needs no account): the functions
// then reach the services inside it, and the VPC endpoints the functions
// need reach AWS's, with no NAT gateway. A zero Network places no function.
type Network struct {
	// VPCID is the VPC ("": none, and no function is placed).
	VPCID string
	// Subnets are the subnets of every function placed, unless its agent
	// names its own (AgentNetworks), and where the interface endpoints go:
	// private subnets, at most one per Availability Zone.
	Subnets []string
	// SecurityGroups are the security groups of every function placed,
	// unless its agent names its own (none: one the stack makes, which
	// lets out everything and in nothing).
	SecurityGroups []string
	// RouteTables are the route tables of the functions' subnets: the
	// gateway endpoints (DynamoDB, S3) are added to them.
	RouteTables []string
	// Functions are the functions placed, by name: submission, scheduler,
	// supervisor, or an agent's name (none: every function).
	Functions []string
	// AgentNetworks are agents' own subnets and security groups (ids of
	// both kinds, by agent), in place of Subnets' or SecurityGroups'.
	AgentNetworks map[string][]string
	// ExistingEndpoints are the VPC endpoints the VPC already has
	// (EndpointServices' names, or all): the stack makes the others the
	// functions need.
	ExistingEndpoints []string
}

// EndpointServices are the services whose VPC endpoints the stack makes for
// the functions it places, as the endpoints' service names end: DynamoDB
// and S3 gateway endpoints, the others interface endpoints.
var EndpointServices = []string{"dynamodb", "s3", "sqs", "sns", "kms", "secretsmanager", "ssm", "xray"}

// AllEndpoints in ExistingEndpoints says every endpoint exists.
const AllEndpoints = "all"

// The coordinators' names in Network.Functions (an agent's is its name).
const (
	FunctionSubmission = "submission"
	FunctionScheduler  = "scheduler"
	FunctionSupervisor = "supervisor"
)

var (
	vpcPattern      = &pattern{regexp.MustCompile(`^vpc-[0-9a-f]{8,17}$`), "a VPC id (vpc-0123abcd)"}
	subnetPattern   = &pattern{regexp.MustCompile(`^subnet-[0-9a-f]{8,17}$`), "a subnet id (subnet-0123abcd)"}
	sgPattern       = &pattern{regexp.MustCompile(`^sg-[0-9a-f]{8,17}$`), "a security group id (sg-0123abcd)"}
	rtbPattern      = &pattern{regexp.MustCompile(`^rtb-[0-9a-f]{8,17}$`), "a route table id (rtb-0123abcd)"}
	fnNamePattern   = &pattern{regexp.MustCompile(`^[a-z][a-z0-9-]{0,24}$`), "a function's name (submission, scheduler, supervisor or an agent's)"}
	endpointPattern = &pattern{regexp.MustCompile(`^(all|` + strings.Join(EndpointServices, "|") + `)$`),
		"all, or one of " + strings.Join(EndpointServices, ", ")}
	netIDPattern = &pattern{regexp.MustCompile(subnetPattern.re.String() + `|` + sgPattern.re.String()),
		"a subnet id (subnet-0123abcd) or a security group id (sg-0123abcd)"}
)

// Placed says whether the function of a name is in the VPC.
func (n Network) Placed(name string) bool {
	return n.VPCID != "" && (len(n.Functions) == 0 || slices.Contains(n.Functions, name))
}

// Of is the subnets and security groups of a placed function: an agent's
// own (AgentNetworks), each kind it names, or Subnets' and
// SecurityGroups'. No security groups: the stack's own.
func (n Network) Of(name string, agent bool) (subnets, groups []string) {
	subnets, groups = n.Subnets, n.SecurityGroups
	if !agent {
		return subnets, groups
	}
	var own, ownGroups []string
	for _, id := range n.AgentNetworks[name] {
		if strings.HasPrefix(id, "sg-") {
			ownGroups = append(ownGroups, id)
		} else {
			own = append(own, id)
		}
	}
	if len(own) > 0 {
		subnets = own
	}
	if len(ownGroups) > 0 {
		groups = ownGroups
	}
	return subnets, groups
}

// Exists says whether the VPC already has the endpoint of a service.
func (n Network) Exists(service string) bool {
	return slices.Contains(n.ExistingEndpoints, AllEndpoints) || slices.Contains(n.ExistingEndpoints, service)
}

// Validate checks the network settings together, against the deployment's
// agents: what each needs of the others, and the names it places.
func (n Network) Validate(agents []string) error {
	if n.VPCID == "" {
		if n.set() {
			return fmt.Errorf("context vpcSubnets, vpcSecurityGroups, vpcRouteTables, vpcFunctions, agentNetworks and vpcExistingEndpoints need vpcId, the VPC they are in")
		}
		return nil
	}
	if len(n.Subnets) == 0 {
		return fmt.Errorf("context vpcId=%s needs vpcSubnets: the functions' subnets (private, one per Availability Zone), where the interface endpoints go too", n.VPCID)
	}
	if len(n.RouteTables) == 0 && !(n.Exists("dynamodb") && n.Exists("s3")) {
		return fmt.Errorf("context vpcId=%s needs vpcRouteTables, the route tables of its subnets, for the DynamoDB and S3 gateway endpoints (or vpcExistingEndpoints=dynamodb,s3 if the VPC has them)", n.VPCID)
	}
	if slices.Contains(n.ExistingEndpoints, AllEndpoints) && len(n.ExistingEndpoints) > 1 {
		return fmt.Errorf("context vpcExistingEndpoints=%s: all, or the services whose endpoints exist, not both", strings.Join(n.ExistingEndpoints, ","))
	}
	known := append([]string{FunctionSubmission, FunctionScheduler, FunctionSupervisor}, agents...)
	for _, f := range n.Functions {
		if !slices.Contains(known, f) {
			return fmt.Errorf("context vpcFunctions names %s: not one of this deployment's functions (%s)", f, strings.Join(known, ", "))
		}
	}
	for _, a := range slices.Sorted(maps.Keys(n.AgentNetworks)) {
		switch {
		case !slices.Contains(agents, a):
			return fmt.Errorf("context agentNetworks names %s: not one of this deployment's agents (%s)", a, strings.Join(agents, ", "))
		case !n.Placed(a):
			return fmt.Errorf("context agentNetworks gives agent %s a network, but vpcFunctions does not place it", a)
		}
	}
	return nil
}

// set says whether any setting but the VPC's id is.
func (n Network) set() bool {
	return len(n.Subnets)+len(n.SecurityGroups)+len(n.RouteTables)+len(n.Functions)+len(n.AgentNetworks)+len(n.ExistingEndpoints) > 0
}

// networksValue is agents' networks: AGENT=ID,ID;AGENT=ID, where each id
// is a subnet's or a security group's.
type networksValue struct{ p *map[string][]string }

func networks(p *map[string][]string) Value { return networksValue{p} }

func (v networksValue) Type() string { return "networks" }

func (v networksValue) String() string {
	var parts []string
	for _, a := range slices.Sorted(maps.Keys(*v.p)) {
		parts = append(parts, a+"="+strings.Join((*v.p)[a], ","))
	}
	return strings.Join(parts, ";")
}

func (v networksValue) Set(s string) error {
	out := map[string][]string{}
	for _, entry := range strings.Split(s, ";") {
		if strings.TrimSpace(entry) == "" {
			continue
		}
		agent, ids, ok := strings.Cut(entry, "=")
		agent = strings.TrimSpace(agent)
		if !ok || !fnNamePattern.re.MatchString(agent) {
			return fmt.Errorf("%q is not AGENT=ID,ID (an agent's name, then its subnet and security group ids)", entry)
		}
		if _, dup := out[agent]; dup {
			return fmt.Errorf("agent %s is named twice", agent)
		}
		var list []string
		if err := listOf(&list, netIDPattern).Set(ids); err != nil {
			return fmt.Errorf("agent %s: %w", agent, err)
		}
		if len(list) == 0 {
			return fmt.Errorf("agent %s: no subnet or security group id", agent)
		}
		out[agent] = list
	}
	*v.p = out
	return nil
}
