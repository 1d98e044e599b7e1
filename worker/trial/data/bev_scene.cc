#include "worker/trial/data/bev_scene.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace frontier::bev {
namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr double kMountRadius = 1.0;   // metres from the ego centre
constexpr double kMountHeight = 1.6;   // metres above the ground
constexpr double kPitchDeg = 8.0;      // downward tilt of every camera
constexpr double kLaneWidth = 3.5;     // metres
constexpr double kRoadHalfWidth = 7.0;  // two lanes each way
constexpr double kEgoClearX = 4.0, kEgoClearY = 3.0;  // no box footprint centre in this rectangle
constexpr double kMargin = 4.0;        // boxes may stand this far outside the grid

Vec3 Add(const Vec3& a, const Vec3& b) { return {a.x + b.x, a.y + b.y, a.z + b.z}; }
Vec3 Sub(const Vec3& a, const Vec3& b) { return {a.x - b.x, a.y - b.y, a.z - b.z}; }
Vec3 Scale(const Vec3& a, double s) { return {a.x * s, a.y * s, a.z * s}; }
double Dot(const Vec3& a, const Vec3& b) { return a.x * b.x + a.y * b.y + a.z * b.z; }
Vec3 Cross(const Vec3& a, const Vec3& b) {
  return {a.y * b.z - a.z * b.y, a.z * b.x - a.x * b.z, a.x * b.y - a.y * b.x};
}

uint64_t SplitMix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// A small deterministic generator (the standard library's distributions are
// not specified bit-for-bit across implementations).
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(SplitMix(seed)) {}
  uint64_t Next() { return state_ = SplitMix(state_); }
  double Uniform() { return (Next() >> 11) * (1.0 / 9007199254740992.0); }
  double Uniform(double a, double b) { return a + (b - a) * Uniform(); }
  int Int(int lo, int hi) { return lo + static_cast<int>(Next() % static_cast<uint64_t>(hi - lo + 1)); }
  double Normal() {  // Box-Muller
    const double u1 = std::max(Uniform(), 1e-300), u2 = Uniform();
    return std::sqrt(-2 * std::log(u1)) * std::cos(2 * kPi * u2);
  }

 private:
  uint64_t state_;
};

// Value noise in [0, 1) on an integer lattice (hash of the cell).
double Hash2(int64_t i, int64_t j, uint64_t seed) {
  const uint64_t h = SplitMix(seed ^ SplitMix(static_cast<uint64_t>(i) * 0x632be59bd9b4e019ULL +
                                              static_cast<uint64_t>(j)));
  return (h >> 11) * (1.0 / 9007199254740992.0);
}

struct Rgb {
  double r, g, b;
};

Rgb GroundColor(double x, double y, uint64_t seed) {
  const double fine = Hash2(static_cast<int64_t>(std::floor(x * 4)), static_cast<int64_t>(std::floor(y * 4)), seed);
  const double coarse = Hash2(static_cast<int64_t>(std::floor(x / 3)), static_cast<int64_t>(std::floor(y / 3)),
                              seed + 1);
  const double ay = std::abs(y);
  if (ay > kRoadHalfWidth) {  // verge: grass
    const double t = 0.7 + 0.2 * coarse + 0.1 * fine;
    return {70 * t, 120 * t, 50 * t};
  }
  // Lane markings: solid edge lines, dashed lines between lanes (3 m of 6 m).
  const double line = 0.15;
  if (std::abs(ay - kRoadHalfWidth + line) < line) return {230, 230, 220};
  const double lane = std::fmod(ay, kLaneWidth);
  if (ay > 1 && (lane < line || lane > kLaneWidth - line) &&
      std::fmod(x + 1000.0 + 6.0 * Hash2(0, 0, seed), 6.0) < 3.0) {
    return {220, 220, 210};
  }
  const double t = 0.85 + 0.1 * coarse + 0.1 * fine;
  return {95 * t, 95 * t, 100 * t};
}

// Ray (origin o, direction d) against an oriented box: entry parameter and the
// hit point in box coordinates, or false.
bool HitBox(const Box& b, const Vec3& o, const Vec3& d, double* t_hit, Vec3* local, int* axis) {
  const double c = std::cos(b.yaw), s = std::sin(b.yaw);
  const Vec3 ro{c * (o.x - b.x) + s * (o.y - b.y), -s * (o.x - b.x) + c * (o.y - b.y), o.z};
  const Vec3 rd{c * d.x + s * d.y, -s * d.x + c * d.y, d.z};
  const double lo[3] = {-b.length / 2, -b.width / 2, 0};
  const double hi[3] = {b.length / 2, b.width / 2, b.height};
  const double oo[3] = {ro.x, ro.y, ro.z}, dd[3] = {rd.x, rd.y, rd.z};
  double t0 = 0, t1 = std::numeric_limits<double>::infinity();
  int enter_axis = -1;
  for (int k = 0; k < 3; ++k) {
    if (std::abs(dd[k]) < 1e-12) {
      if (oo[k] < lo[k] || oo[k] > hi[k]) return false;
      continue;
    }
    double ta = (lo[k] - oo[k]) / dd[k], tb = (hi[k] - oo[k]) / dd[k];
    if (ta > tb) std::swap(ta, tb);
    if (ta > t0) {
      t0 = ta;
      enter_axis = k;
    }
    t1 = std::min(t1, tb);
    if (t0 > t1) return false;
  }
  if (enter_axis < 0) return false;  // the camera is inside the box
  *t_hit = t0;
  *local = Add(ro, Scale(rd, t0));
  *axis = enter_axis;
  return true;
}

Rgb BoxColor(const Box& b, const Vec3& local, int axis) {
  // Fixed light from above and the front-left: top faces bright, sides shaded per face.
  const double shade = axis == 2 ? 1.0 : axis == 0 ? 0.75 : 0.6;
  double tex = 1.0;
  if (b.vehicle) {
    const double zr = local.z / b.height;
    if (axis != 2 && zr > 0.55 && zr < 0.85) tex = 0.35;  // windows
    if (axis != 2 && zr < 0.2) tex = 0.5;                 // wheels / shadowed sill
  } else {
    const int cu = static_cast<int>(std::floor((axis == 0 ? local.y : local.x) * 3));
    const int cv = static_cast<int>(std::floor(local.z * 3));
    tex = ((cu + cv) & 1) ? 1.0 : 0.55;
  }
  const double k = shade * tex;
  return {b.color[0] * k, b.color[1] * k, b.color[2] * k};
}

uint8_t ToByte(double v) { return static_cast<uint8_t>(std::clamp(std::lround(v), 0L, 255L)); }

}  // namespace

Vec3 Camera::Ray(double u, double v) const {
  return Add(Add(Scale(right, (u - cx) / fx), Scale(down, (v - cy) / fy)), forward);
}

bool Camera::Project(const Vec3& p, double* u, double* v, double* depth) const {
  const Vec3 q = Sub(p, position);
  const double z = Dot(q, forward);
  if (z <= 1e-6) return false;
  *u = cx + fx * Dot(q, right) / z;
  *v = cy + fy * Dot(q, down) / z;
  *depth = z;
  return true;
}

int Rig::CellOf(double x, double y) const {
  const double r = std::floor((extent() - x) / resolution), c = std::floor((extent() - y) / resolution);
  if (r < 0 || c < 0 || r >= grid || c >= grid) return -1;
  return static_cast<int>(r) * grid + static_cast<int>(c);
}

void Rig::CellCentre(int row, int col, double* x, double* y) const {
  *x = extent() - (row + 0.5) * resolution;
  *y = extent() - (col + 0.5) * resolution;
}

Rig MakeRig(const BevTaskSpec& spec) {
  Rig rig;
  rig.grid = spec.grid;
  rig.resolution = spec.resolution;
  const double fov = (spec.fov_deg > 0 ? spec.fov_deg : 360.0 / spec.cameras + 20.0) * kPi / 180;
  const double pitch = kPitchDeg * kPi / 180;
  for (int i = 0; i < spec.cameras; ++i) {
    const double yaw = 2 * kPi * i / spec.cameras;
    Camera cam;
    cam.width = spec.width;
    cam.height = spec.height;
    cam.fx = cam.fy = spec.width / 2.0 / std::tan(fov / 2);
    cam.cx = spec.width / 2.0;
    cam.cy = spec.height / 2.0;
    cam.forward = {std::cos(yaw) * std::cos(pitch), std::sin(yaw) * std::cos(pitch), -std::sin(pitch)};
    cam.right = {std::sin(yaw), -std::cos(yaw), 0};
    cam.down = Cross(cam.forward, cam.right);
    cam.position = {kMountRadius * std::cos(yaw), kMountRadius * std::sin(yaw), kMountHeight};
    rig.cameras.push_back(cam);
  }
  return rig;
}

bool Box::Contains(double px, double py) const {
  const double c = std::cos(yaw), s = std::sin(yaw);
  const double lx = c * (px - x) + s * (py - y), ly = -s * (px - x) + c * (py - y);
  return std::abs(lx) <= length / 2 && std::abs(ly) <= width / 2;
}

Scene MakeScene(const BevTaskSpec& spec, uint64_t seed) {
  Rng rng(seed);
  Scene scene;
  scene.seed = seed;
  const double half = spec.grid * spec.resolution / 2 + kMargin;
  const int n = spec.max_boxes > 0 ? rng.Int(0, spec.max_boxes) : 0;
  for (int i = 0; i < n; ++i) {
    Box b;
    b.vehicle = rng.Uniform() < 0.7;
    if (b.vehicle) {
      b.length = rng.Uniform(3.8, 5.2);
      b.width = rng.Uniform(1.7, 2.1);
      b.height = rng.Uniform(1.4, 2.0);
    } else {
      b.length = rng.Uniform(0.6, 1.6);
      b.width = rng.Uniform(0.6, 1.2);
      b.height = rng.Uniform(0.9, 2.0);
    }
    const double palette[6][3] = {{200, 40, 40}, {40, 60, 200}, {230, 230, 235}, {30, 30, 35}, {220, 180, 40},
                                  {60, 160, 80}};
    const int p = rng.Int(0, 5);
    for (int k = 0; k < 3; ++k) b.color[k] = ToByte(palette[p][k] * rng.Uniform(0.8, 1.1));
    const double radius = 0.5 * std::hypot(b.length, b.width);
    bool placed = false;
    for (int attempt = 0; attempt < 20 && !placed; ++attempt) {
      b.x = rng.Uniform(-half, half);
      // Vehicles mostly on the road, aligned with it; objects anywhere.
      const bool on_road = b.vehicle && rng.Uniform() < 0.7;
      b.y = on_road ? rng.Uniform(-kRoadHalfWidth + 1, kRoadHalfWidth - 1) : rng.Uniform(-half, half);
      b.yaw = on_road ? (rng.Uniform() < 0.5 ? 0 : kPi) + rng.Uniform(-0.15, 0.15) : rng.Uniform(0, 2 * kPi);
      if (std::abs(b.x) < kEgoClearX + radius && std::abs(b.y) < kEgoClearY + radius) continue;
      placed = std::all_of(scene.boxes.begin(), scene.boxes.end(), [&](const Box& o) {
        return std::hypot(o.x - b.x, o.y - b.y) > radius + 0.5 * std::hypot(o.length, o.width) + 0.3;
      });
    }
    if (placed) scene.boxes.push_back(b);
  }
  return scene;
}

void Render(const Scene& scene, const Rig& rig, int camera, double noise, uint8_t* rgb, float* depth) {
  const Camera& cam = rig.cameras.at(camera);
  const int h = cam.height, w = cam.width;
  Rng rng(SplitMix(scene.seed) ^ (0x51ed270b27d3c1f5ULL * (camera + 1)));
  const uint64_t tex_seed = SplitMix(scene.seed + 7);
  for (int i = 0; i < h; ++i) {
    for (int j = 0; j < w; ++j) {
      const Vec3 d = cam.Ray(j + 0.5, i + 0.5);
      double best = std::numeric_limits<double>::infinity();
      Rgb color;
      if (d.z < 0) {
        best = -cam.position.z / d.z;
        const Vec3 g = Add(cam.position, Scale(d, best));
        color = GroundColor(g.x, g.y, tex_seed);
      } else {  // sky, brighter towards the horizon
        const double up = std::min(1.0, d.z / 0.5);
        color = {170 - 60 * up, 200 - 40 * up, 235 - 10 * up};
      }
      for (const Box& b : scene.boxes) {
        double t;
        Vec3 local;
        int axis;
        if (HitBox(b, cam.position, d, &t, &local, &axis) && t < best) {
          best = t;
          color = BoxColor(b, local, axis);
        }
      }
      // Distance fog toward grey, so far away looks like far away.
      const double fog = std::isfinite(best) ? std::min(0.5, best / 120.0) : 0.0;
      const double rgb3[3] = {color.r, color.g, color.b};
      for (int k = 0; k < 3; ++k) {
        double v = rgb3[k] * (1 - fog) + 160 * fog;
        if (noise > 0) v += 255 * noise * rng.Normal();
        rgb[(k * h + i) * w + j] = ToByte(v);
      }
      if (depth) depth[i * w + j] = static_cast<float>(best);
    }
  }
}

void Rasterize(const Scene& scene, const Rig& rig, uint8_t* occupancy) {
  for (int r = 0; r < rig.grid; ++r) {
    for (int c = 0; c < rig.grid; ++c) {
      double x, y;
      rig.CellCentre(r, c, &x, &y);
      occupancy[r * rig.grid + c] = std::any_of(scene.boxes.begin(), scene.boxes.end(),
                                                [&](const Box& b) { return b.Contains(x, y); });
    }
  }
}

uint64_t SampleSeed(uint64_t data_seed, int split, int64_t index) {
  return SplitMix(SplitMix(data_seed * 3 + static_cast<uint64_t>(split)) + static_cast<uint64_t>(index));
}

}  // namespace frontier::bev
