/* Search: make command-line flags findable.
 *
 * The search index splits code on punctuation (see `separator` in mkdocs.yml), so the page text
 * `--tensor-parallel-size 2` is indexed as tensor, parallel, size. A query typed the same way
 * would not match: the search engine (lunr) reads a leading "-" as "exclude this word". This
 * script rewrites each word of the query that starts with "-" before it reaches the search
 * worker: "--tensor-parallel-size" becomes "+tensor +parallel +size", so it finds the pages
 * that hold all parts of the flag. The cost: "-word" can no longer exclude a word.
 */
(function () {
  "use strict";
  var QUERY = 2; /* message type the theme uses for a search query */
  var post = Worker.prototype.postMessage;
  Worker.prototype.postMessage = function (message) {
    if (message && message.type === QUERY && typeof message.data === "string") {
      var args = Array.prototype.slice.call(arguments);
      args[0] = Object.assign({}, message, {
        data: message.data.replace(/(^|\s)-+([^\s-][^\s]*)/g, function (_, space, flag) {
          return space + flag.split(/-+/).filter(Boolean).map(function (part) {
            return "+" + part;
          }).join(" ");
        })
      });
      return post.apply(this, args);
    }
    return post.apply(this, arguments);
  };
})();
