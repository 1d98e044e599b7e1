// The procedural scene generator of the bev-synthetic task (docs/bev.md):
// a ground plane with a road, lane markings and texture, oriented boxes
// (vehicles and smaller objects) standing on it, a ring of calibrated pinhole
// cameras that see them by analytic ray casting, and the bird's-eye-view
// occupancy label rasterized from the same boxes.
//
// Torch-free and deterministic: a scene and its images are a function of the
// task's BevTaskSpec and a 64-bit seed only, on every machine and thread.
//
// Frames. Ego: x forward, y left, z up, metres, origin on the ground under the
// vehicle's centre. Camera (OpenCV): x right, y down, z along the optical axis;
// "depth" is the z coordinate in that frame. Pixel (u, v): u to the right,
// v down, the centre of pixel (i, j) at (j + 0.5, i + 0.5).
// BEV grid: cell (row r, column c) covers x in extent - [r, r+1) * resolution
// and y in extent - [c, c+1) * resolution, extent = grid * resolution / 2:
// row 0 is the far front, column 0 the far left, as in a top-down picture
// with the vehicle driving up.
#pragma once

#include <cstdint>
#include <vector>

#include "search_spaces/trial_spec.h"

namespace frontier::bev {

struct Vec3 {
  double x = 0, y = 0, z = 0;
};

struct Camera {
  double fx = 0, fy = 0, cx = 0, cy = 0;  // intrinsics, pixels
  Vec3 right, down, forward;             // camera axes in the ego frame (rotation columns)
  Vec3 position;                         // optical centre in the ego frame
  int width = 0, height = 0;

  // Direction through pixel (u, v), scaled so that its depth component is 1:
  // position + t * Ray(u, v) is the point at depth t.
  Vec3 Ray(double u, double v) const;
  // Pixel and depth of an ego point; false when it is not in front of the camera.
  bool Project(const Vec3& p, double* u, double* v, double* depth) const;
};

// The fixed camera rig and BEV grid of a dataset.
struct Rig {
  std::vector<Camera> cameras;
  int grid = 0;
  double resolution = 1.0;
  double extent() const { return grid * resolution / 2; }
  // Row-major cell index of ground point (x, y), or -1 outside the grid.
  int CellOf(double x, double y) const;
  // Ego (x, y) of the centre of cell (row, col).
  void CellCentre(int row, int col, double* x, double* y) const;
};

// Cameras evenly spaced in yaw, the first looking along +x, mounted 1 m from
// the centre at 1.6 m height and pitched 8 degrees down; fx = fy from the
// horizontal field of view, principal point at the image centre.
Rig MakeRig(const BevTaskSpec& spec);

struct Box {
  double x = 0, y = 0, yaw = 0;               // footprint centre and heading (rad, from +x to +y)
  double length = 0, width = 0, height = 0;  // along its heading, across, up; it stands on z = 0
  uint8_t color[3] = {0, 0, 0};
  bool vehicle = true;  // vehicles have a window band, other objects a checker texture
  bool Contains(double px, double py) const;  // footprint test
};

struct Scene {
  std::vector<Box> boxes;
  uint64_t seed = 0;  // drives the texture phase and the pixel noise
};

// A random scene: 0..max_boxes boxes, not overlapping each other or the ego
// vehicle, in the square of the grid's extent plus a 4 m margin.
Scene MakeScene(const BevTaskSpec& spec, uint64_t seed);

// Renders camera `camera` of `rig`: `rgb` receives 3 x height x width bytes
// (planar RGB), `depth` (optional) height x width depths in metres, +inf
// where the ray hits only sky. `noise` is the standard deviation of Gaussian
// pixel noise in [0, 1] units.
void Render(const Scene& scene, const Rig& rig, int camera, double noise, uint8_t* rgb, float* depth);

// BEV occupancy: grid x grid bytes, 1 where a cell's centre lies inside a
// box footprint (occluded boxes too, as in real labels), else 0.
void Rasterize(const Scene& scene, const Rig& rig, uint8_t* occupancy);

// Seed of sample `index` of split `split` (0 train, 1 val, 2 test).
uint64_t SampleSeed(uint64_t data_seed, int split, int64_t index);

}  // namespace frontier::bev
