// Video files made with FFmpeg's encoders, for tests and fuzz seeds (never downloaded):
// FFV1 (RGB as BGR0) and PNG are lossless, so decoding must give the input back exactly;
// H.264 (libx264) and VP9 (libvpx) are lossy. No GoogleTest here: fuzz/tools uses it too.
#pragma once
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/log.h>
#include <libavutil/opt.h>
#include <libswscale/swscale.h>
}

#include "vision/image_decode.h"

namespace stave::test {

struct VideoSpec {
  const char* muxer = "matroska";  // "matroska", "webm", "mp4"
  const char* encoder = "ffv1";    // "ffv1", "png", "libx264", "libvpx-vp9"
  AVPixelFormat pix_fmt = AV_PIX_FMT_0RGB32;
  int fps = 24;
  std::string file = "clip.mkv";  // name in the scratch folder (encode_test_video)
};

// A deterministic pattern: gradients that move with t, plus a per-pixel hash.
inline std::vector<RgbImage> pattern_frames(int n, int w, int h, int seed = 1) {
  std::vector<RgbImage> out;
  for (int t = 0; t < n; ++t) {
    RgbImage f;
    f.width = w;
    f.height = h;
    f.rgb.resize(static_cast<size_t>(w) * h * 3);
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x) {
        uint8_t* p = f.rgb.data() + (static_cast<size_t>(y) * w + x) * 3;
        p[0] = static_cast<uint8_t>((x * 255 / (w > 1 ? w - 1 : 1) + 7 * t) & 255);
        p[1] = static_cast<uint8_t>((y * 255 / (h > 1 ? h - 1 : 1) + 3 * t) & 255);
        p[2] = static_cast<uint8_t>(((x * 73856093u) ^ (y * 19349663u) ^ (t * 83492791u) ^ seed) & 255);
      }
    out.push_back(std::move(f));
  }
  return out;
}

inline void av_check(int r, const char* what) {
  if (r < 0) throw std::runtime_error(std::string("test video encoder: ") + what + " failed (" + std::to_string(r) + ")");
}

// Encodes `frames` with `spec` into the file `path`.
inline void encode_video_file(const std::vector<RgbImage>& frames, const VideoSpec& spec, const std::string& path) {
  av_log_set_level(AV_LOG_ERROR);
  AVFormatContext* oc = nullptr;
  av_check(avformat_alloc_output_context2(&oc, nullptr, spec.muxer, path.c_str()), "alloc output");
  const AVCodec* codec = avcodec_find_encoder_by_name(spec.encoder);
  if (!codec) throw std::runtime_error(std::string("no encoder ") + spec.encoder);
  AVStream* st = avformat_new_stream(oc, nullptr);
  AVCodecContext* ctx = avcodec_alloc_context3(codec);
  const int w = static_cast<int>(frames.at(0).width), h = static_cast<int>(frames.at(0).height);
  ctx->width = w;
  ctx->height = h;
  ctx->pix_fmt = spec.pix_fmt;
  ctx->time_base = AVRational{1, spec.fps};
  ctx->framerate = AVRational{spec.fps, 1};
  ctx->thread_count = 1;
  ctx->gop_size = 12;
  if (oc->oformat->flags & AVFMT_GLOBALHEADER) ctx->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
  if (std::string(spec.encoder) == "libx264") av_opt_set(ctx->priv_data, "preset", "ultrafast", 0);
  if (std::string(spec.encoder) == "libvpx-vp9") {
    av_opt_set(ctx->priv_data, "deadline", "realtime", 0);
    av_opt_set_int(ctx->priv_data, "cpu-used", 8, 0);
  }
  av_check(avcodec_open2(ctx, codec, nullptr), "open encoder");
  av_check(avcodec_parameters_from_context(st->codecpar, ctx), "parameters");
  st->time_base = ctx->time_base;
  st->avg_frame_rate = ctx->framerate;
  av_check(avio_open(&oc->pb, path.c_str(), AVIO_FLAG_WRITE), "open file");
  av_check(avformat_write_header(oc, nullptr), "write header");
  SwsContext* sws = sws_getContext(w, h, AV_PIX_FMT_RGB24, w, h, spec.pix_fmt, SWS_BILINEAR, nullptr, nullptr, nullptr);
  AVFrame* fr = av_frame_alloc();
  AVPacket* pkt = av_packet_alloc();
  auto drain = [&] {
    for (;;) {
      const int r = avcodec_receive_packet(ctx, pkt);
      if (r == AVERROR(EAGAIN) || r == AVERROR_EOF) return;
      av_check(r, "receive packet");
      av_packet_rescale_ts(pkt, ctx->time_base, st->time_base);
      pkt->stream_index = st->index;
      av_check(av_interleaved_write_frame(oc, pkt), "write packet");
    }
  };
  for (size_t i = 0; i < frames.size(); ++i) {
    fr->format = spec.pix_fmt;
    fr->width = w;
    fr->height = h;
    av_check(av_frame_get_buffer(fr, 0), "frame buffer");
    const uint8_t* src[4] = {frames[i].rgb.data(), nullptr, nullptr, nullptr};
    const int src_stride[4] = {w * 3, 0, 0, 0};
    sws_scale(sws, src, src_stride, 0, h, fr->data, fr->linesize);
    fr->pts = static_cast<int64_t>(i);
    av_check(avcodec_send_frame(ctx, fr), "send frame");
    av_frame_unref(fr);
    drain();
  }
  av_check(avcodec_send_frame(ctx, nullptr), "flush");
  drain();
  av_check(av_write_trailer(oc), "trailer");
  avio_closep(&oc->pb);
  av_packet_free(&pkt);
  av_frame_free(&fr);
  sws_freeContext(sws);
  avcodec_free_context(&ctx);
  avformat_free_context(oc);
}

// One RGB image as a PNG file (FFmpeg's PNG encoder: each packet is a whole PNG).
inline std::string encode_png(const RgbImage& img) {
  const AVCodec* codec = avcodec_find_encoder(AV_CODEC_ID_PNG);
  AVCodecContext* ctx = avcodec_alloc_context3(codec);
  ctx->width = static_cast<int>(img.width);
  ctx->height = static_cast<int>(img.height);
  ctx->pix_fmt = AV_PIX_FMT_RGB24;
  ctx->time_base = AVRational{1, 1};
  av_check(avcodec_open2(ctx, codec, nullptr), "open png");
  AVFrame* fr = av_frame_alloc();
  fr->format = AV_PIX_FMT_RGB24;
  fr->width = ctx->width;
  fr->height = ctx->height;
  av_check(av_frame_get_buffer(fr, 0), "png frame");
  for (int y = 0; y < ctx->height; ++y)
    std::memcpy(fr->data[0] + static_cast<size_t>(y) * fr->linesize[0], img.rgb.data() + static_cast<size_t>(y) * img.width * 3,
                static_cast<size_t>(img.width) * 3);
  av_check(avcodec_send_frame(ctx, fr), "png send");
  AVPacket* pkt = av_packet_alloc();
  av_check(avcodec_receive_packet(ctx, pkt), "png receive");
  std::string out(reinterpret_cast<const char*>(pkt->data), static_cast<size_t>(pkt->size));
  av_packet_free(&pkt);
  av_frame_free(&fr);
  avcodec_free_context(&ctx);
  return out;
}

}  // namespace stave::test
