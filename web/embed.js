// The lab's embed kit for course pages. Include it beside lab iframes
// (`<script src="https://…/embed.js"></script>`) and each iframe takes its panel's height, so
// an embedded panel needs no inner scrollbar and its charts are not below the frame's fold.
//
// The messages: a lab opened with `embed=1` in a frame posts `{ type: 'decode-lab:height',
// height }` (CSS pixels, a whole number) to its parent whenever its content's height changes
// (web/embedded.js); this script sets the height of the iframe that posted it, and when it
// starts it asks every frame to measure again (`{ type: 'decode-lab:measure' }`), in case a
// frame posted before it ran. A course page without it keeps its iframe's own height, and the
// panel scrolls inside it. It runs on the course page, not in the lab.
(() => {
  // A page with several snippets includes this script once per snippet: one listener does.
  if (window.decodeLabEmbed) return;
  window.decodeLabEmbed = true;
  addEventListener('message', (event) => {
    const { data } = event;
    if (!data || data.type !== 'decode-lab:height' || !Number.isFinite(data.height) || data.height <= 0) return;
    for (const frame of document.getElementsByTagName('iframe')) {
      if (frame.contentWindow === event.source) frame.style.height = `${data.height}px`;
    }
  });
  for (const frame of document.getElementsByTagName('iframe')) {
    frame.contentWindow?.postMessage({ type: 'decode-lab:measure' }, '*');
  }
})();
