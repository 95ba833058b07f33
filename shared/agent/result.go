package agent

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/sas-go/sas/shared/kept"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// keptResult is a step's result as the Agent keeps it: stored (its kept
// form, sealed if its order is: kept.Boundary.Seal), and the size of its
// kept form.
type keptResult struct {
	stored kept.Sealed
	bytes  int
}

// weight is what an answer weighs: as it came, its kept form (quoted as
// text if it is not JSON: answer), and what is stored of it (its kept
// form, sealed if its order is).
type weight struct {
	came, kept, stored int
	text               bool
}

// said is the answer's size as a refusal says it: what came (more than
// limit when an HTTP agent read no further) and, quoted as text, what its
// kept form weighs.
func (w weight) said(limit int) string {
	if !w.text || w.came > limit {
		return answered(w.came, limit)
	}
	return fmt.Sprintf("%d bytes, not JSON: kept as a JSON string of %d bytes", w.came, w.kept)
}

// refusal is why an answer of weight w cannot be its step's result, or
// "": its kept form over its workflow's result limit, or what would be
// stored over what the deployment keeps (without a payload bucket, at
// most kept.MaxInline). It is the one place an answer's size decides.
func (h *Handler) refusal(def workflow.Definition, st *statestore.Step, w weight) string {
	switch {
	case w.kept > def.Limit():
		return fmt.Sprintf("%s answered %s, over workflow %s's %d-byte result limit (resultLimit)", st.Agent, w.said(def.Limit()),
			def.Name, def.Limit())
	case w.stored > h.kept.Max():
		sealed := ""
		if w.stored != w.kept {
			sealed = fmt.Sprintf(", %d sealed", w.stored)
		}
		where := "a deployment without a payload bucket keeps (payloadBucket)"
		if h.kept.HasBucket() {
			where = "the payload bucket keeps"
		}
		return fmt.Sprintf("%s answered %s%s, over the %d %s", st.Agent, w.said(def.Limit()), sealed, h.kept.Max(), where)
	}
	return ""
}

// resultOf is what the answer raw to a call that succeeded makes of its
// attempt: the result its step keeps, or the refusal that fails the step
// (its service applied the call: ran) when the result cannot be kept
// (refusal) or is in the product's own form. An undo's answer that cannot
// be kept is not kept, and fails nothing: nothing after it reads it. Its
// size is counted before its kept form is made (a quoted answer may be six
// times as long), and what is stored of it weighed once sealed; the
// sealing is tried again as an outcome's write is (persist), and an error
// is its last failure.
func (h *Handler) resultOf(ctx context.Context, def workflow.Definition, st *statestore.Step, raw []byte,
	order json.RawMessage) (keptResult, string, error) {
	if len(raw) == 0 {
		return keptResult{}, "", nil
	}
	if kept.Own(raw) {
		// A claim check or sealed data the product did not make would be
		// read back (or opened) for the next step as if it had: refused.
		return h.unkept(st, fmt.Sprintf("%s answered with the product's own form (%s or %s): not a result", st.Agent,
			kept.CheckMember, kept.SealedMember))
	}
	ans := answerOf(raw)
	w := weight{came: len(raw), kept: ans.keptLen(), text: !ans.json}
	w.stored = w.kept
	if why := h.refusal(def, st, w); why != "" {
		return h.unkept(st, why)
	}
	res, plain := keptResult{bytes: w.kept}, ans.kept()
	err := h.persist(ctx, st, "its result sealed", func(ctx context.Context) error {
		// Under the data key of its order, if the order is sealed (with no
		// key, a sealed order's result is not kept in clear: an error), in
		// the form its boundary keeps it in (over the inline limit, the
		// object form: no copy in base64).
		out, err := h.kept.Seal(ctx, st.OrderID, kept.Stored(order), plain)
		if err == nil {
			res.stored = out
		}
		return err
	})
	if err != nil {
		return keptResult{}, "", err
	}
	if w.stored = res.stored.Len(); w.stored != w.kept {
		if why := h.refusal(def, st, w); why != "" {
			return h.unkept(st, why)
		}
	}
	return res, "", nil
}

// unkept is an answer that cannot be its step's result, why: the step's
// refusal, or, an undo's, nothing kept and nothing refused.
func (h *Handler) unkept(st *statestore.Step, why string) (keptResult, string, error) {
	if st.Undo {
		h.log.Warn("an undo's answer not kept: "+why, "order_id", st.OrderID, "step", st.Name)
		return keptResult{}, "", nil
	}
	h.log.Warn("answer not kept; recorded as a failure", "order_id", st.OrderID, "step", st.Name, "why", why)
	return keptResult{}, why, nil
}

// answered says how large an answer of n bytes was: an HTTP agent reads
// one byte past its workflow's limit, and no further (an Agent in Go
// answers whole).
func answered(n, limit int) string {
	if n == limit+1 {
		return fmt.Sprintf("more than %d bytes", limit)
	}
	return fmt.Sprintf("%d bytes", n)
}
