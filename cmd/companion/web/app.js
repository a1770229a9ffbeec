// The companion page: a little JavaScript over the app's JSON API.
"use strict";

const $ = (id) => document.getElementById(id);

async function api(method, path, body) {
  const res = await fetch(path, {
    method,
    headers: body ? { "Content-Type": "application/json" } : {},
    body: body ? JSON.stringify(body) : undefined,
  });
  const data = await res.json().catch(() => ({}));
  if (!res.ok) {
    const err = new Error(data.error || res.statusText);
    err.status = res.status;
    throw err;
  }
  return data;
}

function localTime() {
  return new Date().toLocaleString("en-GB", { weekday: "short", hour: "2-digit", minute: "2-digit" });
}

// Hana's face for each emotion, drawn in SVG.
const EYES = {
  neutral: '<ellipse cx="78" cy="106" rx="6" ry="8"/><ellipse cx="122" cy="106" rx="6" ry="8"/>',
  happy: '<path d="M69 109 Q78 97 87 109" class="line"/><path d="M113 109 Q122 97 131 109" class="line"/>',
  excited: '<ellipse cx="78" cy="105" rx="8" ry="10"/><ellipse cx="122" cy="105" rx="8" ry="10"/><circle cx="81" cy="101" r="3" fill="#fff"/><circle cx="125" cy="101" r="3" fill="#fff"/>',
  sad: '<ellipse cx="78" cy="108" rx="5" ry="7"/><ellipse cx="122" cy="108" rx="5" ry="7"/>',
  shy: '<path d="M70 104 Q78 112 86 104" class="line"/><path d="M114 104 Q122 112 130 104" class="line"/>',
  angry: '<ellipse cx="78" cy="108" rx="6" ry="6"/><ellipse cx="122" cy="108" rx="6" ry="6"/>',
};
const BROWS = {
  neutral: '<path d="M68 90 Q78 86 88 90" class="line thin"/><path d="M112 90 Q122 86 132 90" class="line thin"/>',
  happy: '<path d="M68 88 Q78 82 88 88" class="line thin"/><path d="M112 88 Q122 82 132 88" class="line thin"/>',
  excited: '<path d="M68 84 Q78 78 88 84" class="line thin"/><path d="M112 84 Q122 78 132 84" class="line thin"/>',
  sad: '<path d="M68 92 Q78 88 88 86" class="line thin"/><path d="M112 86 Q122 88 132 92" class="line thin"/>',
  shy: '<path d="M68 90 Q78 87 88 91" class="line thin"/><path d="M112 91 Q122 87 132 90" class="line thin"/>',
  angry: '<path d="M68 88 L88 96" class="line"/><path d="M132 88 L112 96" class="line"/>',
};
const MOUTHS = {
  neutral: '<path d="M90 140 L110 140" class="line"/>',
  happy: '<path d="M84 134 Q100 152 116 134" class="line"/>',
  excited: '<path d="M84 132 Q100 160 116 132 Z" fill="#c0392b"/>',
  sad: '<path d="M86 146 Q100 134 114 146" class="line"/>',
  shy: '<path d="M91 141 Q95 137 100 141 Q105 145 109 141" class="line thin"/>',
  angry: '<path d="M88 146 Q100 136 112 146" class="line"/>',
};
const EXTRAS = {
  happy: '<ellipse cx="66" cy="124" rx="9" ry="5" class="blush"/><ellipse cx="134" cy="124" rx="9" ry="5" class="blush"/>',
  excited: '<path d="M160 58 l4 10 10 4 -10 4 -4 10 -4 -10 -10 -4 10 -4z" fill="#f6c445"/><path d="M38 70 l3 7 7 3 -7 3 -3 7 -3 -7 -7 -3 7 -3z" fill="#f6c445"/>',
  sad: '<path d="M124 118 Q119 128 124 132 Q129 128 124 118z" fill="#7ec8f0"/>',
  shy: '<ellipse cx="66" cy="122" rx="12" ry="7" class="blush strong"/><ellipse cx="134" cy="122" rx="12" ry="7" class="blush strong"/>',
  angry: '<path d="M150 62 l8 8 M158 62 l-8 8 M146 66 h16 M154 58 v16" stroke="#d03030" stroke-width="3"/>',
};

function faceSVG(emotion) {
  const e = EYES[emotion] ? emotion : "neutral";
  return `<svg viewBox="0 0 200 230" role="img" aria-label="Hana looks ${e}">
  <style>.line{fill:none;stroke:#3b2a2a;stroke-width:3.5;stroke-linecap:round}.thin{stroke-width:2.5}.blush{fill:#f59ab0;opacity:.55}.strong{opacity:.85}</style>
  <ellipse cx="100" cy="110" rx="78" ry="84" fill="#4a2f27"/>
  <path d="M40 230 Q48 178 100 176 Q152 178 160 230 Z" fill="#e0607e"/>
  <rect x="90" y="150" width="20" height="30" fill="#f6d2b8"/>
  <circle cx="100" cy="108" r="62" fill="#ffe3cf"/>
  <path d="M38 104 Q42 40 100 40 Q160 40 162 104 Q150 72 118 66 Q112 80 92 84 Q96 70 88 66 Q56 74 38 104z" fill="#4a2f27"/>
  <circle cx="146" cy="58" r="9" fill="#f7a8c0"/><circle cx="154" cy="66" r="6" fill="#f7a8c0"/>
  <g fill="#3b2a2a">${EYES[e]}</g>${BROWS[e]}${MOUTHS[e]}${EXTRAS[e] || ""}
</svg>`;
}

// The scenes' backdrops.
const BACKDROPS = {
  cafe: '<rect x="30" y="30" width="150" height="100" rx="6" fill="#fff6e6" stroke="#8a5a3b" stroke-width="6"/><line x1="105" y1="30" x2="105" y2="130" stroke="#8a5a3b" stroke-width="4"/><rect x="470" y="110" width="36" height="28" rx="4" fill="#fff"/><path d="M506 116 q12 6 0 14" stroke="#fff" stroke-width="4" fill="none"/><path d="M480 104 q4 -10 0 -18 M494 104 q4 -10 0 -18" stroke="#fff" stroke-width="2" fill="none" opacity=".7"/><line x1="560" y1="0" x2="560" y2="40" stroke="#5a3b2b" stroke-width="2"/><path d="M540 56 L580 56 L570 40 L550 40z" fill="#f6c445"/>',
  park: '<circle cx="560" cy="50" r="26" fill="#fff3b0"/><rect x="60" y="90" width="16" height="70" fill="#7a5233"/><circle cx="68" cy="80" r="42" fill="#5fa55a"/><circle cx="40" cy="100" r="26" fill="#6fb46a"/><circle cx="96" cy="100" r="28" fill="#6fb46a"/><ellipse cx="520" cy="150" rx="60" ry="18" fill="#4f9a4c"/>',
  home: '<rect x="40" y="34" width="130" height="96" fill="#dff1fb" stroke="#fff" stroke-width="6"/><path d="M34 30 q30 60 0 110 M176 30 q-30 60 0 110" stroke="#e8a0b4" stroke-width="18" fill="none"/><rect x="470" y="40" width="70" height="54" fill="#fff" stroke="#c9a27e" stroke-width="5"/><path d="M480 84 l16 -22 12 14 8 -8 14 16z" fill="#8bc77a"/><rect x="560" y="120" width="8" height="60" fill="#7a5233"/><path d="M544 120 L584 120 L574 96 L554 96z" fill="#f6c445"/>',
  street: '<rect x="10" y="40" width="70" height="130" fill="#9aa6b4"/><rect x="90" y="70" width="60" height="100" fill="#aab4c1"/><rect x="480" y="30" width="80" height="140" fill="#9aa6b4"/><g fill="#e9eef4"><rect x="22" y="56" width="14" height="14"/><rect x="52" y="56" width="14" height="14"/><rect x="22" y="86" width="14" height="14"/><rect x="52" y="86" width="14" height="14"/><rect x="494" y="46" width="16" height="16"/><rect x="528" y="46" width="16" height="16"/><rect x="494" y="80" width="16" height="16"/><rect x="528" y="80" width="16" height="16"/></g><rect x="590" y="60" width="6" height="110" fill="#4b525c"/><circle cx="593" cy="58" r="9" fill="#f6e6a0"/>',
  night: '<circle cx="540" cy="50" r="24" fill="#fdf6d8"/><circle cx="550" cy="44" r="22" fill="#0f1a3d"/><g fill="#fff"><circle cx="80" cy="30" r="2"/><circle cx="160" cy="60" r="1.5"/><circle cx="260" cy="24" r="2"/><circle cx="400" cy="40" r="1.5"/><circle cx="460" cy="90" r="2"/><circle cx="40" cy="80" r="1.5"/></g><rect x="10" y="110" width="70" height="70" fill="#161a36"/><rect x="500" y="100" width="90" height="80" fill="#161a36"/><g fill="#f6d860"><rect x="24" y="124" width="10" height="10"/><rect x="52" y="140" width="10" height="10"/><rect x="516" y="116" width="12" height="12"/><rect x="560" y="136" width="12" height="12"/></g>',
};
const SCENE_NAMES = { cafe: "At the café", park: "In the park", home: "At home", street: "On the street", night: "At night" };

function showReply(reply) {
  $("dialogue").textContent = reply.dialogue;
  $("narration").textContent = reply.narration;
  $("face").dataset.emotion = reply.emotion;
  $("face").innerHTML = faceSVG(reply.emotion);
  showScene(reply.scene);
}

function showScene(scene) {
  const s = BACKDROPS[scene] ? scene : "cafe";
  $("stage").dataset.scene = s;
  $("backdrop").innerHTML = `<svg viewBox="0 0 620 180" preserveAspectRatio="xMidYMax slice">${BACKDROPS[s]}</svg>`;
  $("scene-label").textContent = SCENE_NAMES[s];
}

function showAffinity(value, delta) {
  $("affinity-value").textContent = value;
  $("affinity-fill").style.width = value + "%";
  const d = $("affinity-delta");
  d.className = "";
  d.textContent = "";
  if (delta) {
    d.textContent = (delta > 0 ? "+" : "") + delta;
    d.className = delta > 0 ? "up" : "down";
  }
}

function fillDL(dl, entries) {
  dl.replaceChildren();
  const keys = Object.keys(entries).sort();
  if (keys.length === 0) {
    const dd = document.createElement("dd");
    dd.className = "empty";
    dd.textContent = "(empty)";
    dl.append(dd);
  }
  for (const k of keys) {
    const dt = document.createElement("dt");
    dt.textContent = k;
    const dd = document.createElement("dd");
    const v = entries[k];
    dd.textContent = typeof v === "string" ? v : JSON.stringify(v);
    dl.append(dt, dd);
  }
}

function showView(v) {
  $("who-name").textContent = v.nickname || v.user;
  fillDL($("state-session"), v.state.session || {});
  fillDL($("state-user"), v.state.user || {});
  fillDL($("state-app"), v.state.app || {});
  const log = $("log");
  log.replaceChildren();
  for (const m of v.messages) {
    const li = document.createElement("li");
    li.className = m.role;
    if (m.role === "user") {
      li.textContent = m.text;
    } else {
      li.textContent = m.reply.dialogue;
      const em = document.createElement("em");
      em.textContent = m.reply.narration;
      li.append(em);
    }
    log.append(li);
  }
  log.scrollTop = log.scrollHeight;
}

async function loadMemories() {
  const { memories } = await api("GET", "/api/memories");
  const ul = $("memories");
  ul.replaceChildren();
  $("no-memories").hidden = memories.length > 0;
  for (const m of memories) {
    const li = document.createElement("li");
    const fact = document.createElement("div");
    fact.className = "fact";
    fact.textContent = m.fact;
    const src = document.createElement("div");
    src.className = "source";
    src.textContent = m.sources.length ? "learned on " + m.sources.map((s) => s.label).join(", ") : "source unknown";
    const det = document.createElement("details");
    const sum = document.createElement("summary");
    sum.textContent = `${m.revisions.length} revision${m.revisions.length === 1 ? "" : "s"}`;
    const ol = document.createElement("ol");
    for (const r of m.revisions) {
      const rli = document.createElement("li");
      rli.textContent = `${r.action} · ${new Date(r.time).toLocaleString()} · ${r.fact}`;
      ol.append(rli);
    }
    det.append(sum, ol);
    li.append(fact, src, det);
    ul.append(li);
  }
}

// loadBlocks shows Hana's core memory: the app's persona block and the
// user's human block, which kioku rewrites once a day's session is idle.
async function loadBlocks() {
  const { blocks } = await api("GET", "/api/blocks");
  const ul = $("blocks");
  ul.replaceChildren();
  for (const b of blocks) {
    const li = document.createElement("li");
    li.dataset.label = b.label;
    const head = document.createElement("div");
    head.className = "label";
    head.textContent = `${b.label} · ${b.owner === "app" ? "shared by the app" : "yours"}${b.read_only ? " · read-only" : ""}`;
    const value = document.createElement("div");
    value.className = "value";
    value.textContent = b.value || "(empty)";
    const meta = document.createElement("div");
    meta.className = "source";
    const from = b.from.length ? ` from ${b.from.join(", ")}` : "";
    meta.textContent = `revision ${b.revision}, ${b.change}${from} · ${b.chars}/${b.limit} characters`;
    li.append(head, value, meta);
    ul.append(li);
  }
}

// blocksTimer refreshes the core memory panel while signed in, so that
// the background rewrite shows without a turn.
let blocksTimer = null;
function watchBlocks(on) {
  clearInterval(blocksTimer);
  blocksTimer = on ? setInterval(() => loadBlocks().catch(() => {}), 2000) : null;
}

function setBusy(busy) {
  for (const id of ["send", "message", "new-day"]) $(id).disabled = busy;
  $("busy").hidden = !busy;
}

function showError(err) {
  $("error").hidden = !err;
  $("error").textContent = err ? err.message : "";
}

async function runTurn(path, body) {
  setBusy(true);
  showError(null);
  try {
    const res = await api("POST", path, body);
    showReply(res.reply);
    showAffinity(res.affinity_after, res.affinity_after - res.affinity_before);
    showView(res.view);
    fillDL($("state-temp"), res.temp);
    await loadMemories();
    await loadBlocks();
  } catch (err) {
    if (err.status === 401) return start();
    showError(err);
  } finally {
    setBusy(false);
    $("message").focus();
  }
}

// firebase is set when the app signs in with Firebase Authentication:
// the page signs in anonymously through the Auth emulator and calls kioku
// directly with its ID token ({ auth, signInAnonymously, signOut, kioku }).
let firebase = null;

// setupFirebase loads the Firebase JS SDK's browser builds, which the app
// serves from the firebase npm package, and connects to the Auth emulator.
async function setupFirebase(conf) {
  const { initializeApp } = await import("/firebase/firebase-app.js");
  const { getAuth, connectAuthEmulator, signInAnonymously, signOut } = await import("/firebase/firebase-auth.js");
  const app = initializeApp({ apiKey: "demo-api-key", projectId: conf.project, authDomain: `${conf.project}.firebaseapp.com` });
  const auth = getAuth(app);
  connectAuthEmulator(auth, conf.emulator, { disableWarnings: true });
  await auth.authStateReady();
  firebase = { auth, signInAnonymously, signOut, kioku: conf.kioku };
}

// kiokuCall calls kioku's REST API directly from the page, with the
// signed-in user's ID token; it returns the status and the JSON body.
async function kiokuCall(method, path, body) {
  const token = await firebase.auth.currentUser.getIdToken();
  const res = await fetch(firebase.kioku + path, {
    method,
    headers: { Authorization: `Bearer ${token}`, ...(body ? { "Content-Type": "application/json" } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  return { status: res.status, body: await res.json().catch(() => ({})) };
}

// showDirect lists the user's sessions straight from kioku, with the
// page's ID token.
async function showDirect(user) {
  if (!firebase || !firebase.auth.currentUser) return;
  const { status, body } = await kiokuCall("GET", `/v1/apps/companion/users/${encodeURIComponent(user)}/sessions`);
  const n = (body.sessions || []).length;
  $("direct").hidden = false;
  $("direct").textContent = status === 200
    ? `From this page, with your Firebase ID token, kioku lists ${n} session${n === 1 ? "" : "s"} of yours.`
    : `kioku refused this page's ID token (${status}): ${body.message || ""}`;
}

// showMode tells the reader when Hana is the offline demo's script, and
// sets up the sign-in with Firebase when the app has it.
async function showMode() {
  try {
    const info = await api("GET", "/api/info");
    $("demo-banner").hidden = !info.demo;
    if (info.firebase) {
      await setupFirebase(info.firebase);
      $("signin-firebase").hidden = false;
    }
  } catch (err) {
    showError(err);
  }
}

async function start() {
  showError(null);
  let v;
  try {
    v = await api("GET", "/api/me");
  } catch (err) {
    if (err.status !== 401) return showError(err);
    watchBlocks(false);
    $("main").hidden = true;
    $("who").hidden = true;
    $("signin").hidden = false;
    $("signin-name").focus();
    return;
  }
  $("signin").hidden = true;
  $("main").hidden = false;
  $("who").hidden = false;
  showView(v);
  showAffinity(v.affinity, 0);
  fillDL($("state-temp"), {});
  await loadMemories();
  await loadBlocks();
  watchBlocks(true);
  if (!v.session) await runTurn("/api/day", { local_time: localTime() });
  await showDirect(v.user).catch(showError);
  if (!v.session) return;
  const last = [...v.messages].reverse().find((m) => m.role === "hana");
  if (last) showReply(last.reply);
  else showScene("cafe");
}

$("signin-form").addEventListener("submit", async (e) => {
  e.preventDefault();
  try {
    const body = { name: $("signin-name").value };
    if (firebase) {
      const cred = firebase.auth.currentUser ? { user: firebase.auth.currentUser } : await firebase.signInAnonymously(firebase.auth);
      body.id_token = await cred.user.getIdToken();
    }
    await api("POST", "/api/signin", body);
    await start();
  } catch (err) {
    showError(err);
    alert(err.message);
  }
});

$("chat-form").addEventListener("submit", (e) => {
  e.preventDefault();
  const message = $("message").value.trim();
  if (!message) return;
  $("message").value = "";
  const li = document.createElement("li");
  li.className = "user";
  li.textContent = message;
  $("log").append(li);
  runTurn("/api/chat", { message, local_time: localTime() });
});

$("new-day").addEventListener("click", () => runTurn("/api/day", { local_time: localTime() }));

$("sign-out").addEventListener("click", async () => {
  await api("POST", "/api/signout");
  if (firebase) await firebase.signOut(firebase.auth);
  $("direct").hidden = true;
  start();
});

$("face").innerHTML = faceSVG("neutral");
showScene("cafe");
showMode().then(start);
