// C interface to WebRTC's AudioProcessing (webrtc-audio-processing-1), so that cgo, which
// cannot call C++, can drive it. Mono only; one frame is 10 ms at the configured rate.
#ifndef PARLEY_WEBRTCAPM_H
#define PARLEY_WEBRTCAPM_H

#ifdef __cplusplus
extern "C" {
#endif

typedef struct parley_apm parley_apm;

// Echo controller selection.
enum { PARLEY_APM_ECHO_OFF = 0, PARLEY_APM_ECHO_AEC3 = 1, PARLEY_APM_ECHO_MOBILE = 2 };

// Gain controller 1 modes (-1: off).
enum { PARLEY_APM_AGC1_OFF = -1, PARLEY_APM_AGC1_ADAPTIVE_DIGITAL = 1, PARLEY_APM_AGC1_FIXED_DIGITAL = 2 };

typedef struct {
	int sample_rate;          // 8000, 16000, 32000 or 48000
	int echo;                 // PARLEY_APM_ECHO_*
	int noise_suppression;    // -1 off, else 0..3 (low, moderate, high, very high)
	int high_pass_filter;     // bool
	int agc1_mode;            // PARLEY_APM_AGC1_*
	int agc1_target_level_dbfs;
	int agc1_compression_gain_db;
	int agc1_limiter;         // bool
	int agc2;                 // bool
	float agc2_fixed_gain_db;
	int agc2_adaptive;        // bool
	int residual_echo_detector; // bool
	int aec3_filter_blocks;     // AEC3's linear filter length in 4 ms blocks; 0: the library's 13
	int aec3_initial_state_ms;  // AEC3's initial state; 0: the library's 2500
	int aec3_linear_output;     // bool: keep AEC3's linear filter output (16 kHz only)
	// AEC3's suppressor; 0 keeps the library's value of each.
	float aec3_max_gain_rise;      // suppressor.{normal,nearend}_tuning.max_inc_factor (2)
	float aec3_lf_transparent;     // suppressor.normal_tuning.mask_lf.enr_transparent (0.3)
	float aec3_lf_suppress;        // suppressor.normal_tuning.mask_lf.enr_suppress (0.4)
	float aec3_hf_transparent;     // suppressor.normal_tuning.mask_hf.enr_transparent (0.07)
	float aec3_hf_suppress;        // suppressor.normal_tuning.mask_hf.enr_suppress (0.1)
	float aec3_reverb_decay;       // ep_strength.default_len (0.83)
} parley_apm_config;

typedef struct {
	int has_erl, has_erle, has_divergent, has_delay, has_delay_median, has_delay_std;
	int has_residual, has_residual_max;
	double erl, erle, divergent;
	int delay_ms, delay_median_ms, delay_std_ms;
	double residual, residual_max;
} parley_apm_stats;

// parley_apm_new returns NULL and sets *err (an AudioProcessing error code, or -2 when
// allocation failed) when the processor cannot be made.
parley_apm *parley_apm_new(const parley_apm_config *cfg, int *err);
void parley_apm_free(parley_apm *p);

// Both take one 10 ms mono frame of float samples in [-1, 1].
// Render frames are only analysed; capture frames are processed in place.
int parley_apm_analyze_render(parley_apm *p, const float *frame);
int parley_apm_process_capture(parley_apm *p, float *frame, int delay_ms);
// parley_apm_linear_output copies the last capture frame's linear filter output (AEC3's
// own echo estimate subtracted, nothing suppressed) into out, 10 ms; it returns 0 when
// the processor keeps none (aec3_linear_output off).
int parley_apm_linear_output(parley_apm *p, float *out);

void parley_apm_stats_get(parley_apm *p, parley_apm_stats *out);

#ifdef __cplusplus
}
#endif

#endif
