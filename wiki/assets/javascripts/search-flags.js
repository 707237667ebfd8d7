/* Search: make command-line flags findable, and list first the pages that hold a code word as
 * typed.
 *
 * 1. Flags typed with their dashes. The search index splits code on punctuation (see `separator`
 *    in mkdocs.yml), so the page text `--tensor-parallel-size 2` is indexed as tensor, parallel,
 *    size. A query typed the same way would not match: the search engine (lunr) reads a leading
 *    "-" as "exclude this word". Each word of the query that starts with "-" is rewritten before
 *    it reaches the search worker: "--tensor-parallel-size" becomes "+tensor +parallel +size", so
 *    it finds the pages that hold all parts of the flag. The cost: "-word" can no longer exclude
 *    a word.
 *
 * 2. Exact code first. Because the parts are indexed apart, a page that uses the words
 *    "attention" and "backend" often ranks above a page that holds `--attention-backend` once.
 *    For each code word of the query (a flag, or a word with "-", "_" or "." between letters or
 *    digits, such as NCCL_P2P_LEVEL, sm_120 or gpt-oss-120b), the result list is reordered so that
 *    the pages whose text holds more of those words exactly (any letter case, not as part of a
 *    longer name) come first; pages that hold as many keep the engine's order.
 *
 * 3. Every prefix query answers. The search engine (lunr) merges equal branches of its word tree
 *    by a text key per node: its end-of-word flag, then each edge's one-character label and the
 *    number of the node it leads to, run together. With digits as labels two different nodes can
 *    get the same key (edges 1->23, 4->5 and 1->2, 3->45 both read "012345"); the merged tree
 *    then holds words the index lacks, and any query that reaches one fails inside the worker and
 *    shows "No matching documents" (on this site: "kv", "k", --kv-cache-dtype, --top-k). The
 *    theme's worker is started from a small script that loads it and ends each edge's part of
 *    the key with a comma, which makes keys unique. (English only: the worker then loads no
 *    language files, whose addresses are relative to the theme's worker.)
 *
 * The theme starts its search worker and listens to it while its own script runs, so this file
 * must load before the theme's bundle: overrides/main.html puts it there.
 */
(function () {
  "use strict";

  /* Runs inside the worker, after the theme's worker script has defined self.lunr. */
  function uniqueTreeKeys(lunr) {
    lunr.TokenSet.prototype.toString = function () {
      if (this._str)
        return this._str;
      var key = this.final ? "1" : "0";
      var labels = Object.keys(this.edges).sort();
      for (var i = 0; i < labels.length; i++)
        key += labels[i] + this.edges[labels[i]].id + ",";
      return key;
    };
  }

  var ThemeWorker = window.Worker;
  window.Worker = function (url, options) {
    if (!/\/workers\/search\.[^/]*js$/.test(String(url)))
      return new ThemeWorker(url, options);
    var script = "importScripts(" + JSON.stringify(new URL(url, location.href).href) + ");\n(" +
      uniqueTreeKeys.toString() + ")(self.lunr);\n";
    var blob = new Blob([script], { type: "text/javascript" });
    return new ThemeWorker(URL.createObjectURL(blob), options);
  };
  window.Worker.prototype = ThemeWorker.prototype;
  var Worker = ThemeWorker;
  var SETUP = 0, QUERY = 2, RESULT = 3; /* message types of the theme's search worker */
  var CODE = /^-+[A-Za-z0-9]|[A-Za-z0-9][-_.][A-Za-z0-9]/;
  var pages = {};   /* page address -> the text of all its sections, from the search index */
  var pending = []; /* the code words of each query sent and not yet answered, oldest first */

  function codeWords(query) {
    return query.split(/\s+/).filter(function (word) { return CODE.test(word); })
      .map(function (word) {
        var escaped = word.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
        return new RegExp("(?:^|[^A-Za-z0-9_-])" + escaped + "(?![A-Za-z0-9_-])", "i");
      });
  }

  function flagParts(query) {
    return query.replace(/(^|\s)-+([^\s-][^\s]*)/g, function (_, space, flag) {
      return space + flag.split(/-+/).filter(Boolean).map(function (part) {
        return "+" + part;
      }).join(" ");
    });
  }

  /* Stable reorder of the result groups (one per page) by how many code words the page holds. */
  function exactFirst(items, words) {
    return items.map(function (group, index) {
      var page = String(group[0].location).split("#")[0];
      var text = pages[page] || "";
      var held = words.filter(function (word) { return word.test(text); }).length;
      return { group: group, held: held, index: index };
    }).sort(function (a, b) {
      return b.held - a.held || a.index - b.index;
    }).map(function (entry) { return entry.group; });
  }

  var post = Worker.prototype.postMessage;
  Worker.prototype.postMessage = function (message) {
    if (message && message.type === SETUP && message.data && message.data.docs) {
      pages = {};
      message.data.docs.forEach(function (doc) {
        var page = String(doc.location).split("#")[0];
        pages[page] = (pages[page] || "") + "\n" + doc.title + "\n" + doc.text;
      });
    } else if (message && message.type === QUERY && typeof message.data === "string") {
      pending.push(codeWords(message.data));
      var args = Array.prototype.slice.call(arguments);
      args[0] = Object.assign({}, message, { data: flagParts(message.data) });
      return post.apply(this, args);
    }
    return post.apply(this, arguments);
  };

  /* The event a listener gets for a worker message: a result reordered for its query. */
  function reorder(event) {
    var message = event.data;
    if (!message || message.type !== RESULT)
      return event;
    var words = pending.shift() || [];
    if (!words.length || !message.data || !Array.isArray(message.data.items))
      return event;
    var data = Object.assign({}, message.data, {
      items: exactFirst(message.data.items, words)
    });
    return new MessageEvent("message", { data: Object.assign({}, message, { data: data }) });
  }

  var answered = new WeakMap(); /* worker event -> the event its listeners get */
  var wrapped = new WeakMap();  /* listener -> the wrapper registered in its place */
  var listen = Worker.prototype.addEventListener;
  var unlisten = Worker.prototype.removeEventListener;
  Worker.prototype.addEventListener = function (type, listener, options) {
    if (type !== "message" || typeof listener !== "function")
      return listen.apply(this, arguments);
    var wrapper = wrapped.get(listener);
    if (!wrapper) {
      wrapper = function (event) {
        if (!answered.has(event))
          answered.set(event, reorder(event));
        return listener.call(this, answered.get(event));
      };
      wrapped.set(listener, wrapper);
    }
    return listen.call(this, type, wrapper, options);
  };
  Worker.prototype.removeEventListener = function (type, listener, options) {
    var wrapper = typeof listener === "function" ? wrapped.get(listener) : undefined;
    return unlisten.call(this, type, wrapper || listener, options);
  };
})();
