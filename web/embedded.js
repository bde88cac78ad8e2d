// In a frame with `embed=1`: posts the content's height to the course page (see embed.js).
(() => {
  const embed = new URLSearchParams(location.search).get('embed');
  if (window.parent === window || (embed !== '1' && embed !== 'true')) return;
  let last = 0;
  let queued = false;
  const post = () => {
    queued = false;
    const body = document.body;
    const height = Math.ceil(body.getBoundingClientRect().bottom + scrollY + (parseFloat(getComputedStyle(body).marginBottom) || 0));
    if (height !== last) parent.postMessage({ type: 'decode-lab:height', height: (last = height) }, '*');
  };
  // A change of content is seen even where the browser does not render the frame (a
  // cross-origin frame below the fold); a resize when it does. One measure per batch.
  const soon = () => queued || ((queued = true), queueMicrotask(post));
  addEventListener('message', (event) => {
    if (event.source === parent && event.data?.type === 'decode-lab:measure') (last = 0), post();
  });
  new ResizeObserver(soon).observe(document.body);
  new MutationObserver(soon).observe(document.body, { childList: true, subtree: true, characterData: true });
})();
