// The first estimate, asked while the page is still being parsed: from the
// link's settings over the page's defaults, as `requestOf` spells them,
// before any control exists. The page's own first update takes this
// answer only when it asks exactly the same body; otherwise it asks again.

let firstAsked = askFirst();

function askFirst() {
  const settings = linkSettings(location.hash) || defaultSettings();
  // A pasted config.json is never in a link: the page waits for the paste.
  if (settings.source === "config") return null;
  const body = JSON.stringify(requestOf(settings));
  performance.mark("first-estimate-asked");
  const answer = fetch("/api/estimate", { method: "POST", headers: { "content-type": "application/json" }, body });
  // An answer the page does not take (it asked something else) is no error.
  answer.catch(() => {});
  return { body, answer };
}

// The early answer's response, once, for a request of the same body; null
// otherwise.
function takeFirst(body) {
  const asked = firstAsked;
  firstAsked = null;
  return asked && asked.body === body ? asked.answer : null;
}
