/// The live view served at `GET /` when enabled (`reddot dev`, or `reddot serve --live-view`):
/// one user's badge tree as red dots and numbers, kept current by the stream. The fastest way
/// to see what RedDot does.
///
/// `/?user=alice&token=JWT` opens alice's tree (the token goes to the stream as
/// `access_token`, because browsers' EventSource cannot send headers); without them, a form asks.
enum LiveView {
    static let html = #"""
        <!doctype html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>RedDot live view</title>
        <style>
          body { font: 15px/1.4 system-ui, sans-serif; margin: 2rem auto; max-width: 44rem; color: #222; }
          h1 { font-size: 1.3rem; }
          #status { color: #666; font-size: .85rem; margin-bottom: 1rem; }
          #status[data-state="live"]::before { content: "● "; color: #2a2; }
          #status[data-state="error"]::before { content: "● "; color: #c22; }
          ul { list-style: none; padding-left: 1.4rem; margin: .2rem 0; }
          #tree > ul { padding-left: 0; }
          li > .row { display: inline-flex; align-items: center; gap: .5rem; padding: .15rem 0; }
          .label { font-family: ui-monospace, monospace; }
          .badge { display: inline-block; min-width: .7rem; height: .7rem; border-radius: .7rem; background: #e53935; }
          .badge.count { min-width: 1.2rem; height: 1.2rem; line-height: 1.2rem; padding: 0 .3rem; color: #fff;
                         font-size: .75rem; font-weight: 600; text-align: center; box-sizing: border-box; }
          .badge.icon { height: auto; padding: 0 .4rem; color: #fff; font-size: .7rem; text-transform: uppercase; }
          button.clear { font-size: .7rem; border: 1px solid #ccc; background: #fafafa; border-radius: 3px; cursor: pointer; }
          #empty { color: #888; }
          form input { font: inherit; margin-right: .5rem; }
          form input[name=token] { width: 22rem; }
        </style>
        </head>
        <body>
        <h1>RedDot live view</h1>
        <form id="open" hidden>
          <input name="user" placeholder="user id" required>
          <input name="token" placeholder="bearer token (JWT)">
          <button>Open</button>
        </form>
        <div id="status" data-state="idle"></div>
        <div id="tree"></div>
        <script>
        "use strict";
        const params = new URLSearchParams(location.search);
        const user = params.get("user");
        const token = params.get("token") || "";
        const statusLine = document.getElementById("status");
        const treeBox = document.getElementById("tree");
        let nodes = new Map();   // path -> {path, shown, count, text, icon}
        let version = null;

        function setStatus(state, text) { statusLine.dataset.state = state; statusLine.textContent = text; }

        function flatten(node) {
          if (!node) return;
          if (node.shown) nodes.set(node.path, {path: node.path, shown: node.shown, count: node.count, text: node.text, icon: node.icon});
          (node.children || []).forEach(flatten);
        }

        function badge(node) {
          const span = document.createElement("span");
          span.className = "badge";
          span.dataset.badge = node.text || node.icon || "dot";
          if (node.text) { span.classList.add("count"); span.textContent = node.text; }
          else if (node.icon) { span.classList.add("icon"); span.textContent = node.icon; }
          return span;
        }

        function render() {
          const paths = [...nodes.keys()].sort();
          const children = new Map();
          for (const path of paths) {
            const parent = path.includes(".") ? path.slice(0, path.lastIndexOf(".")) : null;
            if (parent !== null) { if (!children.has(parent)) children.set(parent, []); children.get(parent).push(path); }
          }
          function item(path) {
            const node = nodes.get(path);
            const li = document.createElement("li");
            li.dataset.path = path;
            li.dataset.count = node.count;
            const row = document.createElement("span");
            row.className = "row";
            const label = document.createElement("span");
            label.className = "label";
            label.textContent = path === "root" ? "root (app icon)" : path.slice(path.lastIndexOf(".") + 1);
            row.append(label, badge(node));
            const clear = document.createElement("button");
            clear.className = "clear";
            clear.textContent = "clear";
            clear.title = "clear " + path + " (and everything below it)";
            clear.onclick = () => fetch("/v1/users/" + encodeURIComponent(user) + "/badges/clear", {
              method: "POST", headers: {"Content-Type": "application/json", "Authorization": "Bearer " + token},
              body: JSON.stringify({path: path, force: true})});
            row.append(clear);
            li.append(row);
            const kids = children.get(path) || [];
            if (kids.length) { const ul = document.createElement("ul"); kids.forEach(k => ul.append(item(k))); li.append(ul); }
            return li;
          }
          treeBox.replaceChildren();
          if (!nodes.has("root")) {
            const p = document.createElement("p"); p.id = "empty"; p.textContent = "No badges for " + user + " yet.";
            treeBox.append(p);
            return;
          }
          const ul = document.createElement("ul");
          ul.append(item("root"));
          treeBox.append(ul);
        }

        function connect() {
          const url = "/v1/users/" + encodeURIComponent(user) + "/badges/stream" + (token ? "?access_token=" + encodeURIComponent(token) : "");
          const source = new EventSource(url);
          setStatus("connecting", "connecting…");
          source.addEventListener("snapshot", event => {
            const answer = JSON.parse(event.data);
            nodes = new Map(); flatten(answer.tree); version = answer.version;
            render(); setStatus("live", user + " · version " + version);
          });
          source.addEventListener("change", event => {
            const change = JSON.parse(event.data);
            for (const node of change.changed) { if (node.shown) nodes.set(node.path, node); else nodes.delete(node.path); }
            version = change.version;
            render(); setStatus("live", user + " · version " + version);
          });
          source.onerror = () => setStatus("error", "disconnected; retrying… (is the token valid?)");
        }

        if (user) { connect(); } else { document.getElementById("open").hidden = false; setStatus("idle", "Choose a user."); }
        </script>
        </body>
        </html>
        """#
}
