package server

import agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"

// One struct per service. They embed the Unsafe variants on purpose: a method missing
// from a service must not compile silently into an UNIMPLEMENTED answer.
type (
	specService struct {
		agentplanev1.UnsafeSpecServiceServer
		s *Server
	}
	taskService struct {
		agentplanev1.UnsafeTaskServiceServer
		s *Server
	}
	hitlService struct {
		agentplanev1.UnsafeHitlServiceServer
		s *Server
	}
	capabilityService struct {
		agentplanev1.UnsafeCapabilityServiceServer
		s *Server
	}
	runtimeService struct {
		agentplanev1.UnsafeRuntimeServiceServer
		s *Server
	}
	adminService struct {
		agentplanev1.UnsafeAdminServiceServer
		s *Server
	}
	scheduleService struct {
		agentplanev1.UnsafeScheduleServiceServer
		s *Server
	}
)

var (
	_ agentplanev1.SpecServiceServer       = (*specService)(nil)
	_ agentplanev1.TaskServiceServer       = (*taskService)(nil)
	_ agentplanev1.HitlServiceServer       = (*hitlService)(nil)
	_ agentplanev1.CapabilityServiceServer = (*capabilityService)(nil)
	_ agentplanev1.RuntimeServiceServer    = (*runtimeService)(nil)
	_ agentplanev1.AdminServiceServer      = (*adminService)(nil)
	_ agentplanev1.ScheduleServiceServer   = (*scheduleService)(nil)
)
