package main

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/kioku-ai/kioku/agent"
	"github.com/kioku-ai/kioku/client"
	kiokuv1 "github.com/kioku-ai/kioku/gen/kioku/v1"
	"github.com/kioku-ai/kioku/model"
	"github.com/kioku-ai/kioku/resource"
)

//go:embed web
var webFiles embed.FS

// appID is the kioku app of the demo.
const appID = "companion"

// defaultGreeting is the app: greeting written when the app has none.
const defaultGreeting = "Welcome back to the flower stall on Sakura Street."

// cookieName holds the signed-in user's id. The demo trusts it: it is a
// sign-in by name, not authentication.
const cookieName = "companion_user"

// App is the companion web app: the page, and the JSON API it calls.
type App struct {
	kioku *client.Client
	agent *agent.Agent
	log   *slog.Logger
	// memoryWait bounds the wait for memories saved in a turn.
	memoryWait time.Duration
	// model is the chat model's name, shown on the page; demo says it is
	// the offline demo's scripted Hana.
	model string
	demo  bool
	// firebase, when set, signs users in with Firebase Authentication
	// instead of by name (signin.go).
	firebase *firebaseSignIn
}

// NewApp returns the app on a kioku server and a chat model, writing the
// app: greeting and Hana's persona block when the app has none.
func NewApp(ctx context.Context, kioku *client.Client, chat model.Chat, log *slog.Logger) (*App, error) {
	st, err := kioku.GetState(ctx, &kiokuv1.GetStateRequest{Name: resource.AppStateName(appID)})
	if err != nil {
		return nil, fmt.Errorf("reading the app state from kioku: %w", err)
	}
	if _, ok := st.GetState().AsMap()["app:greeting"]; !ok {
		if err := updateState(ctx, kioku, resource.AppStateName(appID), map[string]any{"app:greeting": defaultGreeting}); err != nil {
			return nil, err
		}
	}
	if err := ensurePersona(ctx, kioku); err != nil {
		return nil, fmt.Errorf("creating Hana's persona block in kioku: %w", err)
	}
	return &App{
		kioku: kioku,
		log:   log,
		agent: &agent.Agent{
			Kioku:       kioku,
			Model:       chat,
			Name:        "hana",
			Instruction: instruction,
			Tools:       []agent.Tool{setNickname()},
			Output:      CharacterReply{},
			Memory:      agent.MemoryPolicy{Mode: agent.MemoryOnSave},
			UserIDKey:   "user_id",
		},
		memoryWait: 20 * time.Second,
		model:      chat.Name(),
	}, nil
}

func updateState(ctx context.Context, kioku *client.Client, name string, delta map[string]any) error {
	d, err := structpb.NewStruct(delta)
	if err != nil {
		return err
	}
	_, err = kioku.UpdateState(ctx, &kiokuv1.UpdateStateRequest{Name: name, StateDelta: d})
	return err
}

// Handler serves the page and the API.
func (a *App) Handler() http.Handler {
	mux := http.NewServeMux()
	web, _ := fs.Sub(webFiles, "web")
	mux.Handle("GET /", http.FileServerFS(web))
	if a.firebase != nil {
		mux.HandleFunc("GET /firebase/{file}", a.firebase.serveSDK)
	}
	mux.HandleFunc("GET /api/info", a.info)
	mux.HandleFunc("POST /api/signin", a.signIn)
	mux.HandleFunc("POST /api/signout", a.signOut)
	mux.HandleFunc("GET /api/me", a.withUser(a.me))
	mux.HandleFunc("POST /api/chat", a.withUser(a.chat))
	mux.HandleFunc("POST /api/day", a.withUser(a.newDay))
	mux.HandleFunc("GET /api/memories", a.withUser(a.memories))
	mux.HandleFunc("GET /api/blocks", a.withUser(a.blocks))
	return mux
}

// httpError is an error with the HTTP status to answer it with.
type httpError struct {
	status int
	msg    string
}

func (e *httpError) Error() string { return e.msg }

func (a *App) fail(w http.ResponseWriter, err error) {
	status, msg := http.StatusInternalServerError, err.Error()
	var he *httpError
	var ce *connect.Error
	switch {
	case errors.As(err, &he):
		status = he.status
	case errors.As(err, &ce) && (ce.Code() == connect.CodeInvalidArgument || ce.Code() == connect.CodeResourceExhausted):
		status = http.StatusBadRequest
	case errors.Is(err, agent.ErrTooManySteps):
		status = http.StatusBadGateway
	default:
		var invalid *agent.InvalidOutputError
		if errors.As(err, &invalid) || strings.HasPrefix(msg, "agent: calling") {
			status = http.StatusBadGateway
		}
	}
	if status >= 500 {
		a.log.Error("request failed", "err", err)
	}
	writeJSON(w, status, map[string]string{"error": msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func readJSON(r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 64<<10))
	if err := dec.Decode(v); err != nil {
		return &httpError{http.StatusBadRequest, "the request body is not the expected JSON: " + err.Error()}
	}
	return nil
}

// userID turns a name into a kioku user id: lower-case letters and digits,
// other runs of characters as '-', at most 40 bytes.
func userID(name string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(name) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			b.WriteRune(r)
			dash = false
		} else {
			dash = true
		}
		if b.Len() >= 40 {
			break
		}
	}
	return strings.TrimRight(b.String(), "-")
}

func (a *App) signIn(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Name    string `json:"name"`
		IDToken string `json:"id_token"`
	}
	if err := readJSON(r, &in); err != nil {
		a.fail(w, err)
		return
	}
	name := strings.TrimSpace(in.Name)
	id := userID(name)
	if id == "" || utf8.RuneCountInString(name) > maxNicknameRunes {
		a.fail(w, &httpError{http.StatusBadRequest, fmt.Sprintf("name: give 1 to %d characters with at least one letter or digit (a-z, 0-9)", maxNicknameRunes)})
		return
	}
	if a.firebase != nil {
		// The user is the one kioku accepts the page's ID token for; the
		// name is only the nickname.
		if in.IDToken == "" {
			a.fail(w, &httpError{http.StatusBadRequest, "id_token: this companion signs in with Firebase Authentication; send the ID token of the signed-in user"})
			return
		}
		var err error
		if id, err = a.firebase.user(r.Context(), in.IDToken); err != nil {
			a.fail(w, err)
			return
		}
	}
	// A first sign-in starts the user's scoped state and their human
	// block.
	st, err := a.kioku.GetState(r.Context(), &kiokuv1.GetStateRequest{Name: resource.UserStateName(appID, id)})
	if err != nil {
		a.fail(w, err)
		return
	}
	init := map[string]any{}
	if _, ok := st.GetState().AsMap()["user:nickname"]; !ok {
		init["user:nickname"] = name
	}
	if _, ok := st.GetState().AsMap()["user:affinity"]; !ok {
		init["user:affinity"] = startAffinity
	}
	if len(init) > 0 {
		if err := updateState(r.Context(), a.kioku, resource.UserStateName(appID, id), init); err != nil {
			a.fail(w, err)
			return
		}
	}
	if err := ensureHuman(r.Context(), a.kioku, id); err != nil {
		a.fail(w, err)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: id, Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode, MaxAge: 30 * 24 * 3600})
	writeJSON(w, http.StatusOK, map[string]string{"user": id})
}

// info tells the page which model plays Hana, and whether it is the
// offline demo's script.
func (a *App) info(w http.ResponseWriter, _ *http.Request) {
	out := map[string]any{"model": a.model, "demo": a.demo}
	if a.firebase != nil {
		out["firebase"] = a.firebase.info()
	}
	writeJSON(w, http.StatusOK, out)
}

func (a *App) signOut(w http.ResponseWriter, _ *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: "/", MaxAge: -1})
	writeJSON(w, http.StatusOK, map[string]string{})
}

// withUser runs h for the signed-in user, or answers 401.
func (a *App) withUser(h func(w http.ResponseWriter, r *http.Request, user string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c, err := r.Cookie(cookieName)
		if err != nil || !a.validUser(c.Value) {
			a.fail(w, &httpError{http.StatusUnauthorized, "sign in first"})
			return
		}
		h(w, r, c.Value)
	}
}

// message is one line of the conversation as the page shows it.
type message struct {
	Role  string          `json:"role"` // "user" or "hana"
	Text  string          `json:"text,omitempty"`
	Reply *CharacterReply `json:"reply,omitempty"`
}

// view is what the page shows of a user: the current day's session, its
// conversation and the state in its three stored scopes.
type view struct {
	User     string         `json:"user"`
	Nickname string         `json:"nickname"`
	Affinity int            `json:"affinity"`
	Session  string         `json:"session"`
	Day      int            `json:"day"`
	Messages []message      `json:"messages"`
	State    map[string]any `json:"state"`
}

// currentSession returns the user's most recently updated session, or nil.
func (a *App) currentSession(ctx context.Context, user string) (*kiokuv1.Session, error) {
	list, err := a.kioku.ListSessions(ctx, &kiokuv1.ListSessionsRequest{Parent: resource.UserName(appID, user), PageSize: 1})
	if err != nil || len(list.GetSessions()) == 0 {
		return nil, err
	}
	return a.kioku.GetSession(ctx, &kiokuv1.GetSessionRequest{Name: list.GetSessions()[0].GetName(), NumRecentEvents: 200})
}

func (a *App) view(ctx context.Context, user string) (*view, error) {
	v := &view{User: user, Messages: []message{}, State: map[string]any{}}
	sess, err := a.currentSession(ctx, user)
	if err != nil {
		return nil, err
	}
	var state map[string]any
	if sess == nil {
		st, err := a.kioku.GetState(ctx, &kiokuv1.GetStateRequest{Name: resource.UserStateName(appID, user)})
		if err != nil {
			return nil, err
		}
		app, err := a.kioku.GetState(ctx, &kiokuv1.GetStateRequest{Name: resource.AppStateName(appID)})
		if err != nil {
			return nil, err
		}
		state = st.GetState().AsMap()
		for k, x := range app.GetState().AsMap() {
			state[k] = x
		}
	} else {
		v.Session = sess.GetName()
		state = sess.GetState().AsMap()
		v.Messages = messagesOf(sess.GetEvents())
	}
	v.State = scoped(state)
	v.Nickname, _ = state["user:nickname"].(string)
	v.Affinity = affinityOf(state)
	if d, ok := state["day"].(float64); ok {
		v.Day = int(d)
	}
	return v, nil
}

// scoped splits a merged state by scope.
func scoped(state map[string]any) map[string]any {
	out := map[string]any{"session": map[string]any{}, "user": map[string]any{}, "app": map[string]any{}}
	for k, v := range state {
		scope := "session"
		if p, _, ok := strings.Cut(k, ":"); ok && (p == "user" || p == "app" || p == "temp") {
			scope = p
		}
		if m, ok := out[scope].(map[string]any); ok {
			m[k] = v
		}
	}
	return out
}

func affinityOf(state map[string]any) int {
	if f, ok := state["user:affinity"].(float64); ok {
		return int(f)
	}
	return startAffinity
}

// messagesOf rebuilds the conversation from stored events: the user's
// messages and Hana's final answers.
func messagesOf(events []*kiokuv1.Event) []message {
	out := []message{}
	for _, e := range events {
		for _, p := range e.GetContent().GetParts() {
			switch {
			case e.GetAuthor() == "user" && p.GetText() != "":
				if !strings.HasPrefix(p.GetText(), stagePrefix) {
					out = append(out, message{Role: "user", Text: p.GetText()})
				}
			case p.GetFunctionCall().GetName() == "final_answer":
				var reply CharacterReply
				b, _ := json.Marshal(p.GetFunctionCall().GetArgs())
				if json.Unmarshal(b, &reply) == nil && reply.Validate() == nil {
					out = append(out, message{Role: "hana", Reply: &reply})
				}
			}
		}
	}
	return out
}

func (a *App) me(w http.ResponseWriter, r *http.Request, user string) {
	v, err := a.view(r.Context(), user)
	if err != nil {
		a.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// turnResult is the answer to a chat message or a new day.
type turnResult struct {
	Reply          *CharacterReply `json:"reply"`
	AffinityBefore int             `json:"affinity_before"`
	AffinityAfter  int             `json:"affinity_after"`
	// Temp is the turn's temp: state, gone once the turn ends.
	Temp map[string]any `json:"temp"`
	// Saved are the facts Hana decided to remember this turn.
	Saved []string `json:"saved"`
	View  *view    `json:"view"`
}

type turnInput struct {
	Message   string `json:"message"`
	LocalTime string `json:"local_time"`
}

// maxMessageBytes bounds a chat message.
const maxMessageBytes = 4 << 10

func (a *App) chat(w http.ResponseWriter, r *http.Request, user string) {
	var in turnInput
	if err := readJSON(r, &in); err != nil {
		a.fail(w, err)
		return
	}
	in.Message = strings.TrimSpace(in.Message)
	if in.Message == "" || len(in.Message) > maxMessageBytes || strings.HasPrefix(in.Message, stagePrefix) {
		a.fail(w, &httpError{http.StatusBadRequest, fmt.Sprintf("message: give 1 to %d bytes of text", maxMessageBytes)})
		return
	}
	sess, err := a.currentSession(r.Context(), user)
	if err != nil {
		a.fail(w, err)
		return
	}
	if sess == nil {
		a.fail(w, &httpError{http.StatusConflict, "no day has started yet: start a new day first"})
		return
	}
	res, err := a.turn(r.Context(), user, sess.GetName(), in.Message, in.LocalTime)
	if err != nil {
		a.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// newDay starts a session, with the user id and the day in its state, and
// lets Hana greet the user.
func (a *App) newDay(w http.ResponseWriter, r *http.Request, user string) {
	var in turnInput
	if err := readJSON(r, &in); err != nil {
		a.fail(w, err)
		return
	}
	day := 1
	prev, err := a.currentSession(r.Context(), user)
	if err != nil {
		a.fail(w, err)
		return
	}
	if d, ok := prev.GetState().AsMap()["day"].(float64); ok {
		day = int(d) + 1
	}
	st, _ := structpb.NewStruct(map[string]any{"user_id": user, "day": day})
	sess, err := a.kioku.CreateSession(r.Context(), &kiokuv1.CreateSessionRequest{
		Parent:  resource.UserName(appID, user),
		Session: &kiokuv1.Session{DisplayName: "Day " + strconv.Itoa(day), State: st},
	})
	if err != nil {
		a.fail(w, err)
		return
	}
	res, err := a.turn(r.Context(), user, sess.GetName(), greetingMessage, in.LocalTime)
	if err != nil {
		a.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// turn runs one turn, then stores the new affinity and waits for the
// memories the turn saved.
func (a *App) turn(ctx context.Context, user, session, msg, localTime string) (*turnResult, error) {
	var opts []agent.TurnOption
	if localTime = strings.TrimSpace(localTime); localTime != "" && len(localTime) <= 64 {
		opts = append(opts, agent.WithStateDelta(map[string]any{"temp:local_time": localTime}))
	}
	res, err := a.agent.Turn(ctx, session, msg, opts...)
	if err != nil {
		return nil, err
	}
	reply := res.Output.(*CharacterReply)
	out := &turnResult{Reply: reply, Temp: map[string]any{}, Saved: []string{}}
	for k, v := range res.State {
		if strings.HasPrefix(k, "temp:") {
			out.Temp[k] = v
		}
	}
	out.AffinityBefore = affinityOf(res.State)
	out.AffinityAfter = nextAffinity(out.AffinityBefore, reply.AffinityLevel)
	if out.AffinityAfter != out.AffinityBefore {
		delta, _ := structpb.NewStruct(map[string]any{"user:affinity": out.AffinityAfter})
		if _, err := a.kioku.AppendEvent(ctx, &kiokuv1.AppendEventRequest{Name: session, Event: &kiokuv1.Event{
			Author: "companion", Actions: &kiokuv1.EventActions{StateDelta: delta},
		}}); err != nil {
			return nil, err
		}
	}
	for _, e := range res.Events {
		for _, p := range e.GetContent().GetParts() {
			if fc := p.GetFunctionCall(); fc.GetName() == "save_to_memory" {
				if f, ok := fc.GetArgs().AsMap()["fact"].(string); ok {
					out.Saved = append(out.Saved, f)
				}
			}
		}
	}
	// The memory panel should show what was just saved.
	wctx, cancel := context.WithTimeout(ctx, a.memoryWait)
	defer cancel()
	for _, op := range res.MemoryOperations {
		if _, err := a.kioku.WaitOperation(wctx, op); err != nil {
			a.log.Warn("waiting for a memory operation", "operation", op, "err", err)
		}
	}
	if out.View, err = a.view(ctx, user); err != nil {
		return nil, err
	}
	return out, nil
}

// memoryView is a memory as the memory panel shows it.
type memoryView struct {
	Name       string         `json:"name"`
	Fact       string         `json:"fact"`
	UpdateTime time.Time      `json:"update_time"`
	Sources    []sourceView   `json:"sources"`
	Revisions  []revisionView `json:"revisions"`
}

type sourceView struct {
	Session string `json:"session"`
	Label   string `json:"label"`
}

type revisionView struct {
	Action string    `json:"action"`
	Fact   string    `json:"fact"`
	Time   time.Time `json:"time"`
}

// sessionLabels maps the names of a user's sessions to their display
// names, which the memory and core memory panels show as sources.
func (a *App) sessionLabels(ctx context.Context, user string) (map[string]string, error) {
	labels := map[string]string{}
	for s, err := range a.kioku.AllSessions(ctx, &kiokuv1.ListSessionsRequest{Parent: resource.UserName(appID, user)}) {
		if err != nil {
			return nil, err
		}
		labels[s.GetName()] = s.GetDisplayName()
	}
	return labels, nil
}

// maxMemoriesShown bounds the memory panel.
const maxMemoriesShown = 100

func (a *App) memories(w http.ResponseWriter, r *http.Request, user string) {
	ctx := r.Context()
	labels, err := a.sessionLabels(ctx, user)
	if err != nil {
		a.fail(w, err)
		return
	}
	out := []memoryView{}
	for m, err := range a.kioku.AllMemories(ctx, &kiokuv1.ListMemoriesRequest{Parent: resource.AppName(appID), Scope: map[string]string{"user_id": user}}) {
		if err != nil {
			a.fail(w, err)
			return
		}
		mv := memoryView{Name: m.GetName(), Fact: m.GetFact(), UpdateTime: m.GetUpdateTime().AsTime(), Sources: []sourceView{}, Revisions: []revisionView{}}
		for _, s := range m.GetSources() {
			label := labels[s.GetSession()]
			if label == "" {
				label = "a deleted session"
			}
			mv.Sources = append(mv.Sources, sourceView{Session: s.GetSession(), Label: label})
		}
		revs, err := a.kioku.ListMemoryRevisions(ctx, &kiokuv1.ListMemoryRevisionsRequest{Parent: m.GetName()})
		if err != nil {
			a.fail(w, err)
			return
		}
		for _, rv := range revs.GetMemoryRevisions() {
			action := strings.ToLower(strings.TrimPrefix(rv.GetAction().String(), "MEMORY_ACTION_"))
			mv.Revisions = append(mv.Revisions, revisionView{Action: action, Fact: rv.GetFact(), Time: rv.GetCreateTime().AsTime()})
		}
		out = append(out, mv)
		if len(out) == maxMemoriesShown {
			break
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"memories": out})
}
