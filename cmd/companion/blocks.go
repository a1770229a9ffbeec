package main

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/kioku-ai/kioku/client"
	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/resource"
)

// Hana's core memory: two kioku blocks that the agent renders in every
// prompt (<core_memory>). The app's persona block says who Hana is, the
// same for every user and read-only; each user's human block says what
// Hana knows about them. kioku rewrites the human block in the background
// (the RewriteBlocks operation) once a day's session has been idle for
// --idle: with a language model, the model rewrites it from the
// conversation; in the offline demo, kioku's offline extractor appends the
// facts it finds. Hana can also edit it herself with core_memory_append
// and core_memory_replace.

// The blocks' labels and texts.
const (
	personaLabel       = "persona"
	personaValue       = "Hana runs a tiny flower stall on Sakura Street. She is warm and a little shy, loves tulips and rainy mornings, and remembers what her friends tell her."
	personaDescription = "Who Hana is; the same for every user."
	humanLabel         = "human"
	humanDescription   = "What Hana knows about the user, kept short: kioku rewrites it from the conversation once a day's session is idle."
	humanLimit         = 600
)

// createBlock creates a block that does not exist yet; one that exists
// (or that another request created meanwhile) is left as it is.
func createBlock(ctx context.Context, kioku *client.Client, b *kiokuv1.Block) error {
	var none int64
	_, err := kioku.BlockService().UpdateBlock(ctx, connect.NewRequest(&kiokuv1.UpdateBlockRequest{Block: b, ExpectedRevision: &none}))
	if connect.CodeOf(err) == connect.CodeFailedPrecondition {
		return nil
	}
	return err
}

// ensurePersona creates the app's persona block when the app has none.
func ensurePersona(ctx context.Context, kioku *client.Client) error {
	return createBlock(ctx, kioku, &kiokuv1.Block{Name: resource.BlockName(appID, "", personaLabel), Value: personaValue, Description: personaDescription, ReadOnly: true})
}

// ensureHuman creates a user's human block, empty, when they have none.
func ensureHuman(ctx context.Context, kioku *client.Client, user string) error {
	return createBlock(ctx, kioku, &kiokuv1.Block{Name: resource.BlockName(appID, user, humanLabel), Description: humanDescription, Limit: humanLimit})
}

// setIdleTrigger gives the app's memory bank an idle trigger of d when it
// has no generation trigger: a session idle that long gets its memories
// generated and the user's blocks rewritten. An app that has a trigger
// keeps it.
func setIdleTrigger(ctx context.Context, kioku *client.Client, d time.Duration) error {
	name := resource.MemoryBankConfigName(appID)
	cfg, err := kioku.MemoryBankService().GetMemoryBankConfig(ctx, connect.NewRequest(&kiokuv1.GetMemoryBankConfigRequest{Name: name}))
	if err != nil {
		return err
	}
	if t := cfg.Msg.GetGenerationTrigger(); t.GetEventCount() > 0 || t.GetIdleDuration().AsDuration() > 0 {
		return nil
	}
	_, err = kioku.MemoryBankService().UpdateMemoryBankConfig(ctx, connect.NewRequest(&kiokuv1.UpdateMemoryBankConfigRequest{
		MemoryBankConfig: &kiokuv1.MemoryBankConfig{Name: name, GenerationTrigger: &kiokuv1.GenerationTrigger{IdleDuration: durationpb.New(d)}},
		UpdateMask:       &fieldmaskpb.FieldMask{Paths: []string{"generation_trigger"}},
	}))
	return err
}

// blockView is a block as the core memory panel shows it.
type blockView struct {
	Label    string `json:"label"`
	Owner    string `json:"owner"` // "app" or "user"
	Value    string `json:"value"`
	Chars    int    `json:"chars"`
	Limit    int32  `json:"limit"`
	ReadOnly bool   `json:"read_only"`
	Revision int64  `json:"revision"`
	// Change says what made the latest revision: "updated", "appended",
	// "replaced" or "rewritten"; From labels the sessions a rewrite read.
	Change string   `json:"change"`
	From   []string `json:"from"`
}

// blocks answers the core memory panel: the app's blocks, then the user's.
func (a *App) blocks(w http.ResponseWriter, r *http.Request, user string) {
	ctx := r.Context()
	labels, err := a.sessionLabels(ctx, user)
	if err != nil {
		a.fail(w, err)
		return
	}
	out := []blockView{}
	for _, owner := range []struct{ parent, name string }{{resource.AppName(appID), "app"}, {resource.UserName(appID, user), "user"}} {
		for b, err := range a.kioku.AllBlocks(ctx, &kiokuv1.ListBlocksRequest{Parent: owner.parent}) {
			if err != nil {
				a.fail(w, err)
				return
			}
			v := blockView{Label: b.GetLabel(), Owner: owner.name, Value: b.GetValue(), Chars: len([]rune(b.GetValue())), Limit: b.GetLimit(),
				ReadOnly: b.GetReadOnly(), Revision: b.GetRevision(), From: []string{}}
			revs, err := a.kioku.BlockService().ListBlockRevisions(ctx, connect.NewRequest(&kiokuv1.ListBlockRevisionsRequest{Parent: b.GetName(), PageSize: 1}))
			var ce *connect.Error
			switch {
			case errors.As(err, &ce) && ce.Code() == connect.CodeNotFound:
				continue // deleted meanwhile
			case err != nil:
				a.fail(w, err)
				return
			}
			if rs := revs.Msg.GetBlockRevisions(); len(rs) > 0 {
				v.Change = strings.ToLower(strings.TrimPrefix(rs[0].GetAction().String(), "BLOCK_ACTION_"))
				for _, s := range rs[0].GetSources() {
					if l := labels[s.GetSession()]; l != "" {
						v.From = append(v.From, l)
					}
				}
			}
			out = append(out, v)
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"blocks": out})
}
