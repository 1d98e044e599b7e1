#!/usr/bin/env python3
"""Checks of the HTML report as headless Chromium rendered it (report_render_test.sh).

  report_render_check.py probe REPORT.html PROBE.html
      writes PROBE.html: the report plus a script that records, after layout, where Chromium drew every
      circle.config and the polyline.front (screen coordinates, computed colors) into
      <script type="application/json" id="frontier-layout"> (display: none; the layout is unchanged)
  report_render_check.py hide-marks REPORT.html OUT.html
      writes OUT.html: the report with its circle.config markers and polyline.front hidden (the reference
      picture: what the markers and the front add to the page)
  report_render_check.py views DOM.html [--quality-column "val acc"]
      every view of the page is laid out; the points span most of the plot area (not squashed); no point
      label overlaps another label or a point, and the baseline is labelled; each point sits where its
      table values put it on the scale its tick labels give; each point's tooltip has the metrics and the
      parity verdict
  report_render_check.py check DOM.html SCREENSHOT.png --configs N --without-marks SCREENSHOT2.png
      DOM.html is `chromium --dump-dom` of PROBE.html, SCREENSHOT.png `chromium --screenshot` of REPORT.html
      and SCREENSHOT2.png of the hide-marks page, all at the same window size: one circle.config per
      configuration with data, the front drawn through the front's circles, and in the picture every
      circle drawn at its place (in its fill color unless another marker overlaps it) and the front line
      where the polyline runs.
"""
import argparse
import json
import re
import struct
import sys
import zlib

PROBE = r"""
<script>
(function () {
  function rgb(css) { var m = css.match(/[\d.]+/g); return m ? m.slice(0, 3).map(Number) : null; }
  var out = {dpr: window.devicePixelRatio, viewport: [window.innerWidth, window.innerHeight], circles: [], front: null};
  document.querySelectorAll('svg circle.config').forEach(function (c) {
    var r = c.getBoundingClientRect();
    var style = getComputedStyle(c);
    out.circles.push({x: r.left + r.width / 2, y: r.top + r.height / 2, d: r.width, fill: rgb(style.fill),
                      stroke: rgb(style.stroke),
                      front: c.getAttribute('data-front'), baseline: c.getAttribute('data-baseline'),
                      config: c.getAttribute('data-config')});
  });
  var p = document.querySelector('svg polyline.front');
  if (p) {
    var m = p.getScreenCTM(), pts = [];
    for (var i = 0; i < p.points.numberOfItems; i++) {
      var q = p.points.getItem(i).matrixTransform(m);
      pts.push([q.x, q.y]);
    }
    var s = getComputedStyle(p);
    out.front = {points: pts, stroke: rgb(s.stroke), width: parseFloat(s.strokeWidth), visibility: s.visibility,
                 display: s.display};
  }
  // The views, the plot area, tick labels, point labels and the table's cells (report_render_check.py views).
  function box(e) { var r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; }
  out.views = {};
  document.querySelectorAll('section.view').forEach(function (s) { out.views[s.id] = box(s); });
  var plot = document.querySelector('svg.front-plot');
  if (plot) {
    var area = plot.querySelector('g.plot-area'), m = plot.getScreenCTM();
    function at(x, y) { var p = plot.createSVGPoint(); p.x = x; p.y = y; p = p.matrixTransform(m); return [p.x, p.y]; }
    var a = at(+area.getAttribute('data-left'), +area.getAttribute('data-top'));
    var b = at(+area.getAttribute('data-right'), +area.getAttribute('data-bottom'));
    out.area = [a[0], a[1], b[0], b[1]];
    out.ticks = {x: [], y: []};
    plot.querySelectorAll('text.tick-label').forEach(function (t) {
      var r = t.getBoundingClientRect();
      var axis = t.classList.contains('x') ? 'x' : 'y';
      out.ticks[axis].push({text: t.textContent, x: r.left + r.width / 2, y: r.top + r.height / 2});
    });
    out.labels = [];
    plot.querySelectorAll('text.point-label').forEach(function (t) {
      out.labels.push({text: t.textContent, row: t.getAttribute('data-row'), box: box(t)});
    });
    out.rows = {};
    plot.querySelectorAll('circle.config').forEach(function (c) { out.rows[c.getAttribute('data-row')] = null; });
    document.querySelectorAll('table.configs tbody tr').forEach(function (tr) {
      var cells = {};
      tr.querySelectorAll('td[data-column]').forEach(function (td) { cells[td.getAttribute('data-column')] = td.textContent; });
      out.rows[tr.getAttribute('data-row')] = cells;
    });
    out.circle_rows = [];
    plot.querySelectorAll('circle.config').forEach(function (c) {
      var r = c.getBoundingClientRect();
      out.circle_rows.push({row: c.getAttribute('data-row'), x: r.left + r.width / 2, y: r.top + r.height / 2,
                            r: r.width / 2, title: (c.querySelector('title') || {}).textContent || ''});
    });
  }
  var node = document.createElement('script');
  node.type = 'application/json';
  node.id = 'frontier-layout';
  node.textContent = JSON.stringify(out);
  document.body.appendChild(node);
})();
</script>
"""

FAILURES = []


def fail(message):
    FAILURES.append(message)
    print("FAIL " + message, flush=True)


def ok(message):
    print("ok   " + message, flush=True)


def read_png(path):
    """(width, height, rows of (r, g, b) tuples) of an 8-bit, non-interlaced RGB or RGBA PNG."""
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(f"{path} is not a PNG")
    pos, idat, header = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", chunk)
        elif kind == b"IDAT":
            idat += chunk
        elif kind == b"IEND":
            break
    width, height, depth, color, _, _, interlace = header
    if depth != 8 or color not in (2, 6) or interlace:
        raise ValueError(f"unsupported PNG: depth {depth}, color type {color}, interlace {interlace}")
    channels = 3 if color == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * channels
    rows, previous = [], bytearray(stride)
    for y in range(height):
        kind = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up = previous[i]
            up_left = previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + left) & 255
            elif kind == 2:
                line[i] = (line[i] + up) & 255
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 255
            elif kind == 4:
                p = left + up - up_left
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - up_left)
                line[i] = (line[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else up_left)) & 255
        rows.append([tuple(line[x * channels:x * channels + 3]) for x in range(width)])
        previous = line
    return width, height, rows


def close(a, b, tolerance=40):
    return a is not None and b is not None and all(abs(x - y) <= tolerance for x, y in zip(a, b))


def cmd_probe(a):
    html = open(a.report).read()
    if "</body>" not in html:
        raise SystemExit(f"{a.report}: no </body>")
    open(a.probe, "w").write(html.replace("</body>", PROBE + "</body>", 1))


def cmd_hide_marks(a):
    html = open(a.report).read()
    style = "<style>svg circle.config, svg polyline.front { visibility: hidden; }</style>"
    open(a.out, "w").write(html.replace("</head>", style + "</head>", 1))


def cmd_check(a):
    dom = open(a.dom).read()
    # The DOM as Chromium parsed it.
    circles = re.findall(r'<circle class="config"[^>]*>', dom)
    if len(circles) != a.configs:
        fail(f"{len(circles)} circle.config in the rendered DOM, expected one per configuration ({a.configs})")
    else:
        ok(f"{len(circles)} circle.config for {a.configs} configurations")
    fronts = re.findall(r'<polyline class="front" points="([^"]*)"', dom)
    if len(fronts) != 1 or not fronts[0].strip():
        fail(f"polyline.front missing or without points: {fronts}")
    match = re.search(r'<script type="application/json" id="frontier-layout">(.*?)</script>', dom, re.S)
    if not match:
        fail("the probe script did not run (no layout in the dumped DOM)")
        return finish()
    layout = json.loads(match.group(1))
    width, height, pixels = read_png(a.screenshot)
    ok(f"screenshot {width}x{height}, viewport {layout['viewport']}, device pixel ratio {layout['dpr']}")
    scale = layout["dpr"]
    colors = {pixels[y][x] for y in range(0, height, 7) for x in range(0, width, 7)}
    if len(colors) < 8:
        fail(f"the screenshot is nearly blank ({len(colors)} colors)")

    _, _, without = read_png(a.without_marks)

    def pixel(x, y, image=pixels):  # the color at CSS pixel (x, y), or None outside the picture
        px, py = int(round(x * scale)), int(round(y * scale))
        return image[py][px] if 0 <= px < width and 0 <= py < height else None

    # Every circle is drawn, in the screenshot, at the place and in the color Chromium laid it out with.
    if len(layout["circles"]) != a.configs:
        fail(f"{len(layout['circles'])} circles laid out, expected {a.configs}")
    for i, c in enumerate(layout["circles"]):
        label = "baseline" if c["baseline"] == "true" else c["config"]
        r = c["d"] / 2 - 1.5  # inside the anti-aliased edge
        disk = [(c["x"] + dx, c["y"] + dy) for dx in range(-int(r), int(r) + 1) for dy in range(-int(r), int(r) + 1)
                if dx * dx + dy * dy <= r * r]
        if c["d"] < 4:
            fail(f"circle {label} is {c['d']:.1f} px wide")
            continue
        if any(pixel(x, y) is None for x, y in disk):
            fail(f"circle {label} at ({c['x']:.0f}, {c['y']:.0f}) is outside the screenshot")
            continue
        # Drawn: its disk differs from the page without markers (also when another marker covers it). Pixels
        # the page without markers already has in the circle's fill cannot tell: a gray circle lies on its own
        # error bars, drawn in the same gray, and a cross through its disk (two pixels wide at a half-pixel
        # position: half the disk) is the same in both pictures.
        telling = [(x, y) for x, y in disk if not close(pixel(x, y, without), c["fill"], 20)]
        changed = sum(1 for x, y in telling if not close(pixel(x, y), pixel(x, y, without), 20))
        # In its color, unless another marker overlaps it (drawn later it hides part of the disk; drawn
        # earlier, e.g. the baseline's ring, it is hidden in the reference page too). A marker can only be
        # partly visible where it overlaps another one, so then a third of its disk must have changed.
        covered = any((o["x"] - c["x"]) ** 2 + (o["y"] - c["y"]) ** 2 < ((o["d"] + c["d"]) / 2) ** 2
                      for j, o in enumerate(layout["circles"]) if j != i)
        filled = sum(1 for x, y in disk if close(pixel(x, y), c["fill"], 20))
        where = f"circle {label} (front={c['front']}, fill {c['fill']}) at ({c['x']:.0f}, {c['y']:.0f})"
        if len(telling) < 0.25 * len(disk):
            fail(f"{where}: {len(disk) - len(telling)} of {len(disk)} pixels of its disk are in its fill without "
                 "the markers; the picture cannot tell whether it is drawn")
        elif changed < (0.3 if covered else 0.6) * len(telling):
            fail(f"{where}: only {changed} of {len(telling)} pixels of its disk not in its fill without the markers "
                 "differ from the page without markers")
        elif not covered and filled < 0.8 * len(disk):
            fail(f"{where}: {filled} of {len(disk)} pixels of its disk in its fill; center {pixel(c['x'], c['y'])}")
        else:
            ok(f"{where}: drawn ({changed} of {len(telling)} pixels changed, {len(disk)} in its disk), "
               + ("partly under another marker" if covered else f"{filled} in its fill"))

    # The front: through exactly the front's circles, visible, and (two points or more) drawn as a line.
    front = layout["front"]
    on_front = [c for c in layout["circles"] if c["front"] == "true"]
    if not front or not front["points"]:
        fail("polyline.front has no points")
        return finish()
    if front["display"] == "none" or front["visibility"] != "visible" or front["width"] <= 0 or not front["stroke"]:
        fail(f"polyline.front is not visible: {front}")
    if len(front["points"]) != len(on_front):
        fail(f"the front has {len(front['points'])} points, {len(on_front)} circles are on the front")
    for x, y in front["points"]:
        if not any(abs(c["x"] - x) < 1.5 and abs(c["y"] - y) < 1.5 for c in on_front):
            fail(f"front point ({x:.1f}, {y:.1f}) is not at a front circle")
    if len(front["points"]) >= 2:
        # What the polyline adds to the picture: pixels along it that differ from the page without markers.
        changed = samples = 0
        for (x0, y0), (x1, y1) in zip(front["points"], front["points"][1:]):
            steps = max(1, int(((x1 - x0) ** 2 + (y1 - y0) ** 2) ** 0.5))  # one sample per pixel
            for i in range(1, steps):
                x, y = x0 + (x1 - x0) * i / steps, y0 + (y1 - y0) * i / steps
                if any((c["x"] - x) ** 2 + (c["y"] - y) ** 2 < (c["d"] / 2 + 2) ** 2 for c in layout["circles"]):
                    continue  # under a marker
                if pixel(x, y) is not None:
                    samples += 1
                    changed += not close(pixel(x, y), pixel(x, y, without), 30)
        # Dashed (6 on, 3 off), partly under error bars drawn on top: a good part, not all, of the path changes.
        if samples < 6:
            ok(f"front segments too short between the markers to sample ({samples} pixels)")
        elif changed < 0.25 * samples:
            fail(f"the front line is not in the picture: {changed} of {samples} pixels along it differ from the "
                 "page without markers")
        else:
            ok(f"front line drawn: {changed} of {samples} pixels along it differ from the page without markers")
    ok(f"front through {len(front['points'])} point(s), the {len(on_front)} front circle(s)")
    finish()


VIEWS = ["front", "configs", "main-effects", "learning-curves", "ablation", "step-time", "profile", "cost"]


def number(text):
    match = re.search(r"[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?", text)
    return float(match.group(0)) if match else None


def fit(points):
    """Least squares pixel = a + b * value over (value, pixel) pairs; (a, b) or None."""
    if len(points) < 2:
        return None
    n = len(points)
    mv = sum(v for v, _ in points) / n
    mp = sum(p for _, p in points) / n
    var = sum((v - mv) ** 2 for v, _ in points)
    if var == 0:
        return None
    b = sum((v - mv) * (p - mp) for v, p in points) / var
    return mp - b * mv, b


def overlap(a, b, slack=0.5):
    return a[0] < b[2] - slack and b[0] < a[2] - slack and a[1] < b[3] - slack and b[1] < a[3] - slack


def cmd_views(a):
    """Every view is there; the points fill the plot; labels overlap nothing; points sit at their values."""
    dom = open(a.dom).read()
    match = re.search(r'<script type="application/json" id="frontier-layout">(.*?)</script>', dom, re.S)
    if not match:
        fail("the probe script did not run (no layout in the dumped DOM)")
        return finish()
    layout = json.loads(match.group(1))
    for view in VIEWS:
        b = layout["views"].get(view)
        if not b:
            fail(f"view #{view} is missing")
        elif b[3] - b[1] < 20 or b[2] - b[0] < 100:
            fail(f"view #{view} is not laid out: {b}")
        else:
            ok(f"view #{view}: {b[2] - b[0]:.0f}x{b[3] - b[1]:.0f} px")
    circles = layout.get("circle_rows", [])
    area = layout.get("area")
    if not circles or not area:
        fail("no points or no plot area in the front plot")
        return finish()
    # Not squashed: where the values differ, the points span most of the plot area on each axis.
    xs, ys = [c["x"] for c in circles], [c["y"] for c in circles]
    for name, values, lo, hi in (("x", xs, area[0], area[2]), ("y", ys, area[1], area[3])):
        span, size = max(values) - min(values), hi - lo
        if len({round(v, 1) for v in values}) < 2:
            ok(f"{name}: all points at one value")
        elif span < a.min_span * size:
            fail(f"points squashed on {name}: they span {span:.0f} of {size:.0f} px ({span / size:.0%})")
        else:
            ok(f"points span {span / size:.0%} of the plot on {name}")
        if min(values) < lo - 1 or max(values) > hi + 1:
            fail(f"a point lies outside the plot area on {name}")
    # Labels: inside the picture, overlapping no other label and no other point.
    labels = layout.get("labels", [])
    for i, l in enumerate(labels):
        for other in labels[i + 1:]:
            if overlap(l["box"], other["box"]):
                fail(f"labels overlap: {l['text']!r} {l['box']} and {other['text']!r} {other['box']}")
        for c in circles:
            disk = [c["x"] - c["r"], c["y"] - c["r"], c["x"] + c["r"], c["y"] + c["r"]]
            if overlap(l["box"], disk, slack=1.5):
                fail(f"label {l['text']!r} covers the point of row {c['row']}")
    ok(f"{len(labels)} labels, none overlapping another label or a point")
    if not any(l["text"] == "baseline" for l in labels):
        fail("the baseline is not labelled")
    # Positions: the tick labels give the scale; each point must sit where the table's values put it.
    scales = {}
    for axis, coordinate in (("x", "x"), ("y", "y")):
        pairs = [(number(t["text"]), t[coordinate]) for t in layout["ticks"][axis] if number(t["text"]) is not None]
        scales[axis] = fit(pairs)
        if scales[axis] is None:
            fail(f"fewer than two {axis} tick labels to read the scale from")
    if scales["x"] and scales["y"]:
        checked = 0
        for c in circles:
            cells = layout["rows"].get(c["row"]) or {}
            x_value = number(cells.get("samples/s", ""))
            y_value = number(cells.get(a.quality_column, ""))
            if x_value is None or y_value is None:
                fail(f"row {c['row']} has no samples/s or {a.quality_column} in the table")
                continue
            ex = scales["x"][0] + scales["x"][1] * x_value
            ey = scales["y"][0] + scales["y"][1] * y_value
            # The table rounds to 0.1 samples/s and 0.0001 quality: allow for it, plus 1.5 px.
            tx = 1.5 + abs(scales["x"][1]) * 0.05
            ty = 1.5 + abs(scales["y"][1]) * 0.00005
            if abs(c["x"] - ex) > tx or abs(c["y"] - ey) > ty:
                fail(f"row {c['row']} is drawn at ({c['x']:.1f}, {c['y']:.1f}), its values {x_value}, {y_value} "
                     f"put it at ({ex:.1f}, {ey:.1f})")
            checked += 1
            if "parity:" not in c["title"] or "throughput:" not in c["title"]:
                fail(f"row {c['row']}'s tooltip lacks the metrics or the parity verdict: {c['title'][:80]!r}")
        ok(f"{checked} points at the positions their table values give on the drawn scales")
    finish()


def finish():
    if FAILURES:
        print(f"{len(FAILURES)} check(s) failed", file=sys.stderr)
        sys.exit(1)
    print("the report renders with its plot")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("probe")
    p.add_argument("report")
    p.add_argument("probe")
    p = sub.add_parser("hide-marks")
    p.add_argument("report")
    p.add_argument("out")
    p = sub.add_parser("check")
    p.add_argument("dom")
    p.add_argument("screenshot")
    p.add_argument("--configs", type=int, required=True)
    p.add_argument("--without-marks", required=True,
                   help="screenshot of the hide-marks page: the report without its circles and front")
    p = sub.add_parser("views", help=cmd_views.__doc__)
    p.add_argument("dom")
    p.add_argument("--quality-column", default="val acc", help="the table column plotted on y")
    p.add_argument("--min-span", type=float, default=0.6, help="least share of the plot the points must span")
    a = parser.parse_args()
    {"probe": cmd_probe, "hide-marks": cmd_hide_marks, "check": cmd_check, "views": cmd_views}[a.command](a)


if __name__ == "__main__":
    main()
