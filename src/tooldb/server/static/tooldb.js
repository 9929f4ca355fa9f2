// tooldb dashboard: sortable tables and local times. No dependencies, no build step.
(function () {
  "use strict";
  function cellValue(row, index, kind) {
    var cell = row.cells[index];
    if (!cell) return "";
    var raw = cell.getAttribute("data-value");
    if (kind === "num") return raw !== null ? parseFloat(raw) : parseFloat(cell.textContent) || 0;
    return (raw !== null ? raw : cell.textContent).trim().toLowerCase();
  }
  function makeSortable(table) {
    var headers = table.tHead ? table.tHead.rows[0].cells : [];
    Array.prototype.forEach.call(headers, function (th, index) {
      var kind = th.getAttribute("data-sort");
      if (!kind) return;
      th.addEventListener("click", function () {
        var ascending = !th.classList.contains("asc");
        Array.prototype.forEach.call(headers, function (h) { h.classList.remove("asc", "desc"); });
        th.classList.add(ascending ? "asc" : "desc");
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (a, b) {
          var x = cellValue(a, index, kind), y = cellValue(b, index, kind);
          var order = x < y ? -1 : x > y ? 1 : 0;
          return ascending ? order : -order;
        });
        rows.forEach(function (row) { body.appendChild(row); });
      });
    });
  }
  function localTimes() {
    document.querySelectorAll("[data-ts]").forEach(function (el) {
      var seconds = parseFloat(el.getAttribute("data-ts"));
      if (!isNaN(seconds)) el.textContent = new Date(seconds * 1000).toLocaleString();
    });
  }
  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("table.sortable").forEach(makeSortable);
    localTimes();
  });
})();
